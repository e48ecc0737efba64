"""AWS Bedrock's batch inference (model invocation jobs over S3) for Claude, and its InvokeModel call."""

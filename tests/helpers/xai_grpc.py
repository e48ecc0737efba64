"""The simulated xAI batches over gRPC, for the official `xai-sdk` (gRPC only) to drive unmodified.

`BatchMgmt` is the SDK's own generated servicer (`xai_sdk/proto/v6/batch_pb2_grpc.py`, 1.21.0),
implemented here over the simulated provider's xAI handlers (`simulated.apis.xai.XaiApi`) on the
store of a running `SimulatedServer`: the same batches its REST routes serve. Each call is the REST
route's handler with the message as the REST body says it (`google.protobuf.json_format`: the REST
answers are the messages' JSON, parsed strictly), but for what the REST API names otherwise: a
request's `completion_request` (a `GetCompletionsRequest`) is the REST `chat_get_completion` (a chat
completions body), and a result's `completion_response` (a `GetChatCompletionResponse`) its
`chat_get_completion` (a chat completion), converted here field by field.
"""

from __future__ import annotations

from concurrent import futures
from typing import Any

import grpc
from google.protobuf import empty_pb2, json_format
from google.rpc import status_pb2
from xai_sdk.proto.v6 import batch_pb2, batch_pb2_grpc, chat_pb2, sample_pb2, usage_pb2

from lexpilot_batch.simulated.apis.xai import XaiApi
from lexpilot_batch.simulated.errors import ApiError

CODES = {400: grpc.StatusCode.INVALID_ARGUMENT, 404: grpc.StatusCode.NOT_FOUND}
FINISH = {"stop": sample_pb2.REASON_STOP, "length": sample_pb2.REASON_MAX_LEN}


def chat_body(request: chat_pb2.GetCompletionsRequest) -> dict[str, Any]:
    """A `GetCompletionsRequest` as the chat completions body the REST add call carries."""
    messages = [
        {
            "role": chat_pb2.MessageRole.Name(m.role).removeprefix("ROLE_").lower(),
            "content": "".join(c.text for c in m.content),
        }
        for m in request.messages
    ]
    body: dict[str, Any] = {"model": request.model, "messages": messages}
    for field in ("max_tokens", "temperature", "top_p", "seed"):
        if request.HasField(field):
            body[field] = getattr(request, field)
    return body


def completion(answer: dict[str, Any]) -> chat_pb2.GetChatCompletionResponse:
    """A chat completion (the REST result's `chat_get_completion`) as the SDK's response message."""
    usage = answer.get("usage") or {}
    outputs = []
    for choice in answer.get("choices") or []:
        message = choice.get("message") or {}
        outputs.append(
            chat_pb2.CompletionOutput(
                index=int(choice.get("index") or 0),
                finish_reason=FINISH.get(choice.get("finish_reason"), sample_pb2.REASON_INVALID),
                message=chat_pb2.CompletionMessage(
                    content=message.get("content") or "",
                    reasoning_content=message.get("reasoning_content") or "",
                    role=chat_pb2.ROLE_ASSISTANT,
                ),
            )
        )
    details = usage.get("completion_tokens_details") or {}
    cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
    return chat_pb2.GetChatCompletionResponse(
        id=str(answer.get("id") or ""),
        model=str(answer.get("model") or ""),
        outputs=outputs,
        usage=usage_pb2.SamplingUsage(
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            completion_tokens=int(usage.get("completion_tokens") or 0),
            total_tokens=int(usage.get("total_tokens") or 0),
            reasoning_tokens=int(details.get("reasoning_tokens") or 0),
            cached_prompt_text_tokens=int(cached),
        ),
    )


class BatchMgmt(batch_pb2_grpc.BatchMgmtServicer):
    def __init__(self, api: XaiApi) -> None:
        self.api = api

    def _call(self, context: grpc.ServicerContext, fn: Any, *args: Any) -> Any:
        try:
            return fn(*args)
        except ApiError as exc:
            context.abort(CODES.get(exc.status, grpc.StatusCode.UNKNOWN), exc.message)

    def CreateBatch(self, request: batch_pb2.CreateBatchRequest, context: grpc.ServicerContext) -> batch_pb2.Batch:  # noqa: N802
        body = json_format.MessageToDict(request, preserving_proto_field_name=True)
        return json_format.ParseDict(self._call(context, self.api.create, body), batch_pb2.Batch())

    def AddBatchRequests(self, request: batch_pb2.AddBatchRequestsRequest, context: grpc.ServicerContext) -> Any:  # noqa: N802
        items = [
            {
                "batch_request_id": r.batch_request_id,
                "batch_request": {"chat_get_completion": chat_body(r.completion_request)},
            }
            for r in request.batch_requests
        ]
        self._call(context, self.api.add, request.batch_id, {"batch_requests": items})
        return empty_pb2.Empty()

    def GetBatch(self, request: batch_pb2.GetBatchRequest, context: grpc.ServicerContext) -> batch_pb2.Batch:  # noqa: N802
        return json_format.ParseDict(self._call(context, self.api.get, request.batch_id), batch_pb2.Batch())

    def ListBatches(self, request: batch_pb2.ListBatchesRequest, context: grpc.ServicerContext) -> Any:  # noqa: N802
        query = {"page_size": str(request.limit or 100), "pagination_token": request.pagination_token}
        return json_format.ParseDict(self._call(context, self.api.listing, query), batch_pb2.ListBatchesResponse())

    def CancelBatch(self, request: batch_pb2.CancelBatchRequest, context: grpc.ServicerContext) -> batch_pb2.Batch:  # noqa: N802
        return json_format.ParseDict(self._call(context, self.api.cancel, request.batch_id), batch_pb2.Batch())

    def ListBatchResults(self, request: batch_pb2.ListBatchResultsRequest, context: grpc.ServicerContext) -> Any:  # noqa: N802
        query = {"page_size": str(request.limit or 100), "pagination_token": request.pagination_token}
        page = self._call(context, self.api.results, request.batch_id, query)
        out = batch_pb2.ListBatchResultsResponse(pagination_token=page.get("pagination_token", ""))
        for item in page["results"]:
            found = item["batch_result"]
            if "response" in found:
                data = batch_pb2.BatchResultData(
                    completion_response=completion(found["response"]["chat_get_completion"])
                )
                out.results.add(batch_request_id=item["batch_request_id"], response=data)
            else:
                error = status_pb2.Status(code=int(found["error"]["code"]), message=found["error"]["message"])
                out.results.add(batch_request_id=item["batch_request_id"], error=error)
        return out


def serve(api: XaiApi) -> tuple[grpc.Server, int]:
    """A gRPC server of `BatchMgmt` on a free local port, started; and its port."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    batch_pb2_grpc.add_BatchMgmtServicer_to_server(BatchMgmt(api), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    return server, port

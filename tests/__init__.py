"""The test suite: a folder per layer of the package, the scenarios in `scenarios/`, the shared fakes and builders in `helpers/`."""

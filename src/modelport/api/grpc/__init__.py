"""The Open Inference Protocol over gRPC (``inference.GRPCInferenceService``), a surface
beside ``/v2``: ``codec`` (messages <-> the ``/v2`` request records and numpy, pure),
``status`` (refusals -> gRPC status codes), ``service`` (the methods: authenticate,
parse, call ``InferenceService``, encode), ``server`` (the ``grpc.aio`` server the
lifecycle starts). ``oip_pb2`` is generated from ``oip.proto`` by
``scripts/grpc_codegen.sh``."""

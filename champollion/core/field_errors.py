"""INVALID_ARGUMENT with its fields as data: the gRPC rich error model.

The gateway (and a family) refusing a field attaches a `google.rpc.Status`
to the call's trailers, holding a `google.rpc.BadRequest` (one field
violation per field: its path, such as ``predictions[6].latency_s``, and
what is wrong) and a `google.rpc.ErrorInfo` whose metadata gives the entry
id of each violation that concerns one entry (keyed by its place in the
BadRequest). A client reads them back as
InvalidField, the same class the checks raise, so it can point at a file
and line without reading the message's text.
"""
from __future__ import annotations

import grpc
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status

from champollion.core.limits import ECHO_CHARS, MAX_ID_CHARS, InvalidField

# ErrorInfo naming the entry ids of the violated fields (metadata: the
# violation's index in the BadRequest, "0", "1", ... -> id: ErrorInfo's keys
# are short names, not field paths).
ENTRY_IDS_REASON = "ENTRY_IDS"
# The longest field path, description or message the details carry.
MAX_TEXT_CHARS = 1_000
DOMAIN = "champollion.eval.v1"


def _sendable(entry_id: str) -> str:
    """An id as the details carry it: an id refused for its length is cut
    (trailers are small: a megabyte id would end the call with
    RESOURCE_EXHAUSTED instead of the refusal)."""
    return entry_id if len(entry_id) <= MAX_ID_CHARS else entry_id[:ECHO_CHARS] + "..."


def _cut(text: str) -> str:
    """A text as the trailers carry it: the message travels three times
    (grpc-message, the status, the violation), and trailers past 8 KiB end
    the call with RESOURCE_EXHAUSTED instead of the refusal."""
    return text if len(text) <= MAX_TEXT_CHARS else text[:MAX_TEXT_CHARS - 3] + "..."


def invalid_argument(message: str, violations: list[InvalidField]) -> grpc.Status:
    """The status to abort a call with: INVALID_ARGUMENT, `message`, and
    `violations` as details (aio: ``context.abort(status.code,
    status.details, status.trailing_metadata)``)."""
    bad_request = error_details_pb2.BadRequest(field_violations=[
        error_details_pb2.BadRequest.FieldViolation(field=_cut(violation.field), description=_cut(violation.message))
        for violation in violations
    ])
    status = status_pb2.Status(code=code_pb2.INVALID_ARGUMENT, message=_cut(message))
    status.details.add().Pack(bad_request)
    entry_ids = {str(index): _sendable(violation.entry_id) for index, violation in enumerate(violations)
                 if violation.entry_id}
    if entry_ids:
        status.details.add().Pack(error_details_pb2.ErrorInfo(reason=ENTRY_IDS_REASON, domain=DOMAIN,
                                                               metadata=entry_ids))
    return rpc_status.to_status(status)


async def abort_invalid(context: grpc.aio.ServicerContext, error: InvalidField) -> None:
    """Ends an aio call with INVALID_ARGUMENT: the error's text, and its
    field and entry id as details."""
    status = invalid_argument(str(error), [error])
    await context.abort(status.code, status.details, status.trailing_metadata)


def field_violations(error: grpc.RpcError) -> list[InvalidField]:
    """The fields a refused call names in its details, as InvalidField (in
    the order sent); empty when it carries none."""
    try:
        status = rpc_status.from_call(error)
    except ValueError:  # trailers that contradict the call's own status: not to be trusted
        return []
    if status is None:
        return []
    violations: list[error_details_pb2.BadRequest.FieldViolation] = []
    entry_ids: dict[str, str] = {}
    for detail in status.details:
        if detail.Is(error_details_pb2.BadRequest.DESCRIPTOR):
            bad_request = error_details_pb2.BadRequest()
            detail.Unpack(bad_request)
            violations.extend(bad_request.field_violations)
        elif detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            detail.Unpack(info)
            if info.reason == ENTRY_IDS_REASON and info.domain == DOMAIN:
                entry_ids.update(info.metadata)
    return [InvalidField(violation.field, violation.description, entry_ids.get(str(index)))
            for index, violation in enumerate(violations)]

"""The exceptions tunefarm raises. Their text is what tune-client prints after "tune-client: "
for the same failure: the service's own message, prefixed with what was being done."""
import grpc


class TunefarmError(Exception):
    """Anything that went wrong talking to the farm or running a built model."""


class InvalidArgument(TunefarmError, ValueError):
    """An argument this side can already tell is wrong (a malformed workload, duration, token file)."""


class NotFound(TunefarmError, LookupError):
    """Nothing matches: no job with that id, no measurement of a workload yet."""


class ServiceError(TunefarmError):
    """A call the service refused or could not answer.

    `code` is the gRPC status name ("INVALID_ARGUMENT", "UNAUTHENTICATED", "UNAVAILABLE", ...) and
    `details` the service's message alone; str() is the line tune-client prints."""

    def __init__(self, message, code, details):
        super().__init__(message)
        self.code = code
        self.details = details


class Unreachable(ServiceError, ConnectionError):
    """The service did not answer at its address (down, wrong port, or TLS/plaintext mismatch)."""


class ServiceNotFound(ServiceError, NotFound):
    """The service answered NOT_FOUND (an unknown job id)."""


class JobFailed(TunefarmError):
    """Job.wait() on a job that ended FAILED or CANCELLED; `job` is its last status."""

    def __init__(self, message, job):
        super().__init__(message)
        self.job = job


def _unreachable_hint(details):
    """What to check about a service that did not answer, as tune-client says it (with this
    client's tls_ca= where tune-client names --tls-ca)."""
    if any(text in details for text in ("Socket closed", "handshake", "SSL", "certificate")):
        return ("; if it serves TLS, give tls_ca= with the CA that signed its certificate (a wrong CA fails so too);"
                " if it does not, leave tls_ca= out")
    if not details:
        return "; is it running, and is that its --listen address? (one that serves TLS needs tls_ca=)"
    if "onnect" in details or "refused" in details:
        return "; is it running, and is that its --listen address?"
    return ""


def from_rpc(error, address, what):
    """The exception for a failed call, worded as tune-client's rpc_failure(): "WHAT: reason" (the
    reason alone without `what`), with an unreachable service named as such."""
    code = error.code() if hasattr(error, "code") else grpc.StatusCode.UNKNOWN
    details = (error.details() if hasattr(error, "details") else None) or str(error)
    # UNAVAILABLE in the service's own words (tunerd cannot reach the tracker, its history cannot be
    # written) is about what it could not reach, not about this channel.
    this_channel = details.startswith(("failed to connect", "Socket closed", "Connection reset", "DNS resolution failed")) \
        or "handshake" in details
    if code == grpc.StatusCode.UNAVAILABLE and this_channel:
        reason, kind = f"cannot reach {address} ({details}){_unreachable_hint(details)}", Unreachable
    elif code == grpc.StatusCode.UNAVAILABLE:
        reason, kind = details, ServiceError
    else:
        reason, kind = details, ServiceNotFound if code == grpc.StatusCode.NOT_FOUND else ServiceError
    return kind(f"{what}: {reason}" if what else reason, code.name, details)

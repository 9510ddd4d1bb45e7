"""Gateway configuration: where each family lives, batch size, deadlines.

A YAML file (``champollion serve --config``) or built in code by the embedded
stack:

    families:
      surface: localhost:50061      # a family left out is "not configured"
      structural:                   # or per target language, with a default
        routes: {crk: ca-west:50062, nob: eu-north:50062}
        default: localhost:50062
    batch_size: 256
    deadline_seconds: 300
    max_in_flight: 16
    max_concurrent_runs: 16         # runs scored at once; more wait in a queue
    max_queued_runs: 48             # runs waiting for a turn; more get RESOURCE_EXHAUSTED
    upload_idle_seconds: 60         # an upload's longest wait for its next part
    upload_deadline_seconds: 3600   # ... and for all its parts, in all
    max_open_uploads: 8             # uploads open at once per token; more get RESOURCE_EXHAUSTED
    max_text_chars: 20000           # per source, reference, prediction, raw_prediction, variant
    store: sqlite:////var/lib/champollion/runs.sqlite   # or postgresql://...; absent: no store
    tls_ca: /etc/champollion/tls/ca.crt  # families over TLS, trusting this CA; absent: plaintext
    family_token_file: /etc/champollion/family-token  # sent to families served with --auth
    submission_budget: 5            # runs per token per secret-tier corpus version per window
    submission_window_hours: 24
    near_duplicate_entries: 3       # predictions differing from an earlier run's in at most
    near_duplicate_share: 0.05      # max(3, 5% of the entries): a probe, held for review
    floor_runs: true                # score and store every corpus version's floor runs
    version_key_file: /etc/champollion/version-key  # secret-tier versions' public ids (db version-key new)
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from pathlib import Path

import grpc
import yaml

from champollion.core.cards import UnknownLanguage, default_registry
from gateway.card.breakdowns import min_shown_entries
from gateway.card.metrics import FAMILIES


class ConfigError(ValueError):
    """A gateway config that cannot be used; the message names the field."""


@dataclass
class GatewayConfig:
    # Family name -> address ("host:port"), or {"routes": {language: address},
    # "default": address}. Missing families are not configured.
    families: dict[str, str | dict] = field(default_factory=dict)
    batch_size: int = 256
    # Deadline of one ScoreBatch call.
    deadline_seconds: float = 300.0
    # ScoreBatch calls of one run in flight at once, across its families; an
    # upload is read no further ahead than that.
    max_in_flight: int = 16
    # Admission (gateway.server.admission): runs scored at once, and runs
    # waiting for a turn; a run beyond both is refused at once with
    # RESOURCE_EXHAUSTED. Measured with `serve` (every family in the
    # gateway's process) on 2 cores, 200 concurrent runs of 216 entries: all
    # at once starve the event loop and 90 calls end CANCELLED; 16 + 48 score
    # 64 (the last after 53 s) and refuse 136 within 4 s; 4 + 16 score only
    # 20 in 35 s (the semantic family batches across concurrent runs).
    max_concurrent_runs: int = 16
    max_queued_runs: int = 48
    # Uploads (EvaluateUpload, CompareUpload; gateway.server.admission): the
    # gateway waits at most `upload_idle_seconds` for each part (the first
    # too) and `upload_deadline_seconds` for all of them, counting only the
    # time it waits for the client (not the time it holds the upload back
    # while batches are scored or the run waits for a turn); past either the
    # call ends DEADLINE_EXCEEDED naming the setting, the run dropped. A
    # token may have `max_open_uploads` uploads open at once (an open
    # gateway's callers count as one); one more gets RESOURCE_EXHAUSTED
    # before any part is read. An upload takes its run slot only when
    # scoring starts (its first batch ready), so uploads that idle hold none.
    upload_idle_seconds: float = 60.0
    upload_deadline_seconds: float = 3600.0
    max_open_uploads: int = 8
    # Longest text (characters) of a source, reference, prediction,
    # raw_prediction or variant: per-entry work stays bounded.
    max_text_chars: int = 20_000
    # Run store URL (gateway/store): every run card is stored there. None: the
    # gateway stores nothing and its ListRuns / GetRun / Leaderboard answer
    # UNAVAILABLE.
    store: str | None = None
    # The CA certificate (PEM file) that signed the families' certificates:
    # with it the gateway reaches every family over TLS (cross-region FST
    # services, say). None: plaintext, as inside one cluster.
    tls_ca: str | None = None
    # A file whose first line is the token the gateway sends to every family
    # (families deployed apart and served with `serve --family NAME --auth
    # TOKENS.yaml`, where it is a maintainer's). None: families ask for none.
    family_token_file: str | None = None
    # Submissions to a holdout or gold corpus (gateway/server/submissions.py):
    # each token (submitter) may make `submission_budget` runs per corpus
    # version in any `submission_window_hours`, counted before scoring; more
    # get RESOURCE_EXHAUSTED with the time a place frees. A run whose
    # predictions differ from one of the token's earlier runs on the version
    # in at most max(near_duplicate_entries, near_duplicate_share of the
    # entries) probes the references: it is held for a maintainer's review.
    submission_budget: int = 5
    submission_window_hours: float = 24.0
    near_duplicate_entries: int = 3
    near_duplicate_share: float = 0.05
    # Floor runs (gateway/server/floor.py): every corpus version's degenerate
    # systems, scored by the gateway in the background once a corpus is
    # registered or a run is answered on a version without them (needs a
    # store). False: none are made; stored ones still set the baseline tier.
    floor_runs: bool = True
    # The version key (gateway/store/version_keys.py): the file, made by
    # `champollion db version-key new`, under which holdout and gold corpus
    # versions get their public ids. None: $CHAMPOLLION_VERSION_KEY, else a
    # key file beside a SQLite store, else a key of this process only.
    version_key_file: str | None = None

    def __post_init__(self):
        try:  # the environment's k of secret-tier views (gateway/card/breakdowns.py), checked at start
            min_shown_entries()
        except ValueError as error:
            raise ConfigError(str(error)) from None
        _check_families(self.families)
        self.families = {name: _with_route_codes(name, target) for name, target in self.families.items()}
        _check_count("batch_size", self.batch_size)
        _check_count("max_in_flight", self.max_in_flight)
        _check_count("max_concurrent_runs", self.max_concurrent_runs)
        _check_count("max_queued_runs", self.max_queued_runs, least=0)
        _check_count("max_text_chars", self.max_text_chars)
        _check_count("max_open_uploads", self.max_open_uploads)
        _check_seconds("upload_idle_seconds", self.upload_idle_seconds)
        _check_seconds("upload_deadline_seconds", self.upload_deadline_seconds)
        _check_count("submission_budget", self.submission_budget)
        _check_count("near_duplicate_entries", self.near_duplicate_entries, least=0)
        window = self.submission_window_hours
        if isinstance(window, bool) or not isinstance(window, (int, float)) or not 0 < window < math.inf:
            raise ConfigError(f"submission_window_hours: must be a positive number of hours, got {window!r}")
        share = self.near_duplicate_share
        if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0 <= share < 1:
            raise ConfigError(f"near_duplicate_share: must be a share from 0 up to (not including) 1, got {share!r}")
        if not isinstance(self.floor_runs, bool):
            raise ConfigError(f"floor_runs: must be true or false, got {self.floor_runs!r}")
        deadline = self.deadline_seconds
        if isinstance(deadline, bool) or not isinstance(deadline, (int, float)) or not 0 < deadline < math.inf:
            raise ConfigError(f"deadline_seconds: must be a positive number of seconds, got {deadline!r}")
        if self.tls_ca is not None and (not isinstance(self.tls_ca, str) or not self.tls_ca.strip()):
            raise ConfigError(f"tls_ca: must be the path of a PEM file of CA certificates, got {self.tls_ca!r}")
        key_file = self.version_key_file
        if key_file is not None and (not isinstance(key_file, str) or not key_file.strip()):
            raise ConfigError(f"version_key_file: must be the path of a version key file, got {key_file!r}")
        token_file = self.family_token_file
        if token_file is not None and (not isinstance(token_file, str) or not token_file.strip()):
            raise ConfigError(f"family_token_file: must be the path of a file holding a token, got {token_file!r}")

    def family_credentials(self) -> grpc.ChannelCredentials | None:
        """TLS credentials trusting `tls_ca` for the families' channels; None
        for plaintext. Read when the gateway starts: an unreadable file stops it."""
        if self.tls_ca is None:
            return None
        try:
            certificates = Path(self.tls_ca).read_bytes()
        except OSError as error:
            raise ConfigError(f"tls_ca: cannot read {self.tls_ca}: {error.strerror}") from None
        return grpc.ssl_channel_credentials(root_certificates=certificates)

    def family_metadata(self) -> tuple:
        """The metadata carrying `family_token_file`'s token to the families;
        empty without one. Read when the gateway starts: a file that cannot be
        read, or whose token cannot travel in a header, stops it."""
        if self.family_token_file is None:
            return ()
        try:
            lines = Path(self.family_token_file).read_text(encoding="utf-8").strip().splitlines()
        except (OSError, UnicodeDecodeError) as error:
            raise ConfigError(f"family_token_file: cannot read {self.family_token_file}: "
                              f"{getattr(error, 'strerror', None) or error}") from None
        token = lines[0].strip() if lines else ""
        if not token or not token.isascii() or not token.isprintable() or any(c.isspace() for c in token):
            raise ConfigError(f"family_token_file: {self.family_token_file} must hold one token (one word of "
                              f"printable ASCII, as `champollion token new` prints it) on its first line")
        return (("authorization", f"Bearer {token}"),)

    def address_for(self, family: str, language: str) -> str | None:
        """Where `family` is served for target `language` (ISO 639-3); None
        when the family is not configured or no route covers the language."""
        target = self.families.get(family)
        if isinstance(target, dict):
            return (target.get("routes") or {}).get(language) or target.get("default")
        return target

    def addresses(self, family: str) -> list[str]:
        """Every address configured for `family`."""
        target = self.families.get(family)
        if isinstance(target, dict):
            found = [*(target.get("routes") or {}).values(), target.get("default")]
            return sorted({address for address in found if address})
        return [target] if target else []


# gRPC's name-resolver schemes (its doc/naming.md): "dns:///name:port",
# "ipv4:host:port,host:port", ...; a target without one is host:port.
TARGET_SCHEMES = ("dns:", "ipv4:", "ipv6:", "unix:", "unix-abstract:", "vsock:")


def _check_address(where: str, address) -> None:
    if isinstance(address, str) and address and not any(c.isspace() for c in address):
        if address.startswith(TARGET_SCHEMES):
            if address.partition(":")[2]:
                return
        else:
            host, _, port = address.rpartition(":")
            if host and port.isdigit() and 0 < int(port) < 65536:
                return
    raise ConfigError(f"{where}: {address!r} is not an address: give host:port (port 1-65535) "
                      f"or a gRPC target such as dns:///name:port")


def _check_families(families) -> None:
    if not isinstance(families, dict):
        raise ConfigError(f"families: must be a mapping of family name to address, got {families!r}")
    unknown = sorted(map(str, set(families) - set(FAMILIES)))
    if unknown:
        raise ConfigError(f"families: unknown family name(s) {', '.join(unknown)}; known: {', '.join(FAMILIES)}")
    for name, target in families.items():
        if not isinstance(target, dict):
            _check_address(f"families.{name}", target)
            continue
        if set(target) - {"routes", "default"}:
            raise ConfigError(f"families.{name}: only 'routes' and 'default' may be given")
        routes = target.get("routes") or {}
        if not isinstance(routes, dict):
            raise ConfigError(f"families.{name}.routes: must be a mapping of language code to address")
        for language, address in routes.items():
            _check_address(f"families.{name}.routes.{language}", address)
        if target.get("default") is not None:
            _check_address(f"families.{name}.default", target["default"])


def _with_route_codes(family: str, target):
    """A family's routes keyed by the card code their language tags reach
    (`de-DE`, `ger` -> `deu`), as `address_for` is asked; ConfigError naming
    a route whose key names no language."""
    if not isinstance(target, dict) or not target.get("routes"):
        return target
    routes = {}
    for language, address in target["routes"].items():
        try:
            routes[default_registry().resolve(str(language)).card.code] = address
        except UnknownLanguage as error:
            raise ConfigError(f"families.{family}.routes.{language}: {error}") from None
    return {**target, "routes": routes}


def _check_count(name: str, value, least: int = 1) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ConfigError(f"{name}: must be a whole number of at least {least}, got {value!r}")


def _check_seconds(name: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf:
        raise ConfigError(f"{name}: must be a positive number of seconds, got {value!r}")


def read_yaml(path: str | Path):
    """The YAML document in file `path` (None when empty); a ConfigError
    names the file and, for malformed YAML, the line and column."""
    try:
        with open(path, encoding="utf-8") as handle:
            return yaml.safe_load(handle)
    except OSError as error:
        raise ConfigError(f"{path}: cannot read: {error.strerror}") from None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ConfigError(f"{path}: malformed YAML{where}: {getattr(error, 'problem', None) or error}") from None


def load_config(path: str | Path) -> GatewayConfig:
    """The gateway config in YAML file `path`; a ConfigError names the file,
    then the field or the line that is wrong."""
    data = read_yaml(path)
    if data is None:
        data = {}
    known = [setting.name for setting in fields(GatewayConfig)]
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: must be a mapping with {', '.join(known)}; got a {type(data).__name__}")
    unknown = sorted(map(str, set(data) - set(known)))
    if unknown:
        raise ConfigError(f"{path}: unknown setting(s) {', '.join(unknown)}; known: {', '.join(known)}")
    try:
        return GatewayConfig(**data)
    except ConfigError as error:
        raise ConfigError(f"{path}: {error}") from None

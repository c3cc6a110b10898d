"""The operator's side of the configuration: `[metrics]` (the Prometheus endpoint `/metrics`) and
`[logging]` (how the server's log lines are written), each read from its TOML table into a typed,
validated object. Every problem is recorded by the reader, one line per key."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from pathlib import Path

from .toml_reader import TableReader, non_empty

LOG_FORMATS = ("text", "json")


@dataclass(frozen=True)
class MetricsSettings:
    # `/metrics` answers 404 unless true.
    enabled: bool = False
    # Who may read it: addresses or networks, compared with the address a request comes from
    # after `[server] trusted_proxies` (a proxy on this machine does not open it to everyone).
    allow: tuple[str, ...] = ("127.0.0.1/32", "::1/128")
    # Under a server of several processes (gunicorn): a folder the processes share their counts
    # through (prometheus_client's multiprocess mode), emptied when the server starts.
    multiprocess_dir: Path | None = None


@dataclass(frozen=True)
class LoggingSettings:
    # "text": one line of `key=value` words per event; "json": one JSON object per line.
    format: str = "text"


def metrics_settings(reader: TableReader, base: Path) -> MetricsSettings:
    default = MetricsSettings()
    allow = reader.strings("allow") or default.allow
    for value in allow:
        try:
            ipaddress.ip_network(value, strict=False)
        except ValueError:
            reader.errors.append(f"{reader.where}.allow: {value!r} is not an IP address or network")
    folder = None
    if "multiprocess_dir" in reader.table:  # an empty string is a mistake, not "none"
        folder = reader.take("multiprocess_dir", str, check=non_empty)
    settings = MetricsSettings(
        enabled=reader.take("enabled", bool, default.enabled),
        allow=allow,
        multiprocess_dir=(base / folder).resolve() if folder and folder.strip() else None,
    )
    reader.finish()
    return settings


def logging_settings(reader: TableReader) -> LoggingSettings:
    settings = LoggingSettings(
        format=reader.take("format", str, LoggingSettings.format, _log_format),
    )
    reader.finish()
    return settings


def _log_format(value: str) -> str | None:
    return None if value in LOG_FORMATS else f"must be one of {', '.join(LOG_FORMATS)}"

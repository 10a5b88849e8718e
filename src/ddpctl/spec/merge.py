"""Flags over file: how override values (CLI flags; None means 'not given') are merged into the file's data
before validation, so both are checked by the same rules with the same messages.

Overrides use the spec's keys; a section option is dotted (``kubernetes.namespace``). A scalar flag replaces the
file's value; ``env`` and ``secret_env`` flags add to the file's entries or override them per name. A
``shm_size`` flag without an ``ipc`` flag replaces the file's ``ipc: host``.
"""

from __future__ import annotations

from typing import Any, Mapping


def apply_overrides(data: dict[str, Any], lines: Any, overrides: Mapping[str, Any]) -> set[str]:
    """Merge ``overrides`` into ``data`` in place (forgetting the file line of a replaced key); the keys given."""
    overrides = dict(overrides)
    if overrides.get("shm_size") is not None and overrides.get("ipc") is None:
        overrides["ipc"] = "private"  # a size on the command line replaces the file's ipc: host
    from_flags: set[str] = set()
    for key, value in overrides.items():
        if value is None:
            continue
        from_flags.add(key)
        if "." in key:
            top, sub = key.split(".", 1)
            if data.get(top) is None:
                data[top] = {}
            section = data[top]
            if isinstance(section, dict):  # an invalid section is reported by validation, never dropped
                section[sub] = value
                lines.lines.pop((top, sub), None)
        elif key in ("env", "secret_env") and data.get(key) is not None and not isinstance(data[key], (dict, list)):
            pass  # the file's value is of no valid type: validation reports it, a flag never hides it
        elif key == "secret_env" and isinstance(value, list) and data.get("secret_env") is not None:
            from ddpctl import secrets

            data["secret_env"] = secrets.merge(data["secret_env"], value)  # flags add / override per name
        elif key == "env" and isinstance(value, list) and isinstance(data.get("env"), (dict, list)):
            data["env"] = merge_env(data["env"], value)  # flags add to / override the file's env per key
        else:
            data[key] = value
            lines.lines.pop((key,), None)
    return from_flags


def merge_env(file_env: dict | list, flags: list) -> dict | list:
    """The file's env with ``KEY=VALUE`` flags added or overriding per key (validation happens later)."""
    if not all(isinstance(f, str) and "=" in f for f in flags):
        return list(flags)  # a malformed flag: let validation report it
    from ddpctl.secrets import once

    keys = once([f.split("=", 1)[0] for f in flags], "--env")
    if isinstance(file_env, list):  # a flag replaces the file's entry of its key (a key twice in the file stays
        return [e for e in file_env if not (isinstance(e, str) and e.split("=", 1)[0] in keys)] + list(flags)
    merged = dict(file_env)
    for item in flags:
        k, v = item.split("=", 1)
        merged.pop(k, None)  # an overridden key moves to the end, like a later flag
        merged[k] = v
    return merged


"""Load a profile from YAML, keeping line numbers, and turn every problem into a positioned error.

ruamel.yaml's round-trip loader remembers where each key and item came from; pydantic
reports *what* is wrong and *where in the data*; this module joins the two so the user
sees ``lab.yaml:14:9: streams[2].vlan[0].id: must be ≤ 4094``. Errors are data
(:class:`~tgen_tui.diagnostics.Problem`) until the CLI renders them (DESIGN rule 9).
"""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.reader import ReaderError

from tgen_tui.diagnostics import BadInput, Problem
from tgen_tui.profiles.models import Profile

_PATH_IN_MSG = re.compile(
    r"^((?:[A-Za-z_][A-Za-z0-9_]*|\[\d+\])(?:\.[A-Za-z_][A-Za-z0-9_]*|\[\d+\])*): (.*)$", re.S
)
_TOKEN = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)|\[(\d+)\]")


def _yaml() -> YAML:
    y = YAML(typ="rt")
    y.allow_duplicate_keys = False
    return y


def parse_yaml(text: str, filename: str) -> Any:
    """Parse YAML text into ruamel's position-carrying tree; syntax errors become BadInput."""
    try:
        return _yaml().load(io.StringIO(text))
    except ReaderError as e:  # a character YAML does not allow (NUL, U+FFFE, ...)
        before = text[: max(0, e.position)]
        line = before.count("\n") + 1
        col = len(before) - (before.rfind("\n") + 1) + 1
        msg = (
            f"unacceptable character #x{e.character:04x}: {e.reason}"
            if isinstance(e.character, int)
            else str(e.reason)
        )
        raise BadInput(msg, [Problem(filename, line, col, "", f"YAML: {msg}")]) from None
    except MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        msg = " ".join(x for x in (e.context, e.problem) if x) or "invalid YAML"
        raise BadInput(msg, [Problem(filename, line, col, "", f"YAML: {msg}")]) from None
    except (YAMLError, Exception) as e:  # noqa: BLE001 - any parser failure is bad input, not a crash
        msg = " ".join(str(e).split())
        raise BadInput(msg, [Problem(filename, 1, 1, "", f"YAML: {msg}")]) from None


def to_plain(node: Any, _depth: int = 0) -> Any:
    """Convert ruamel's tree into plain dicts/lists/scalars for pydantic."""
    if _depth > 64:
        raise ValueError("nesting too deep (recursive YAML alias?)")
    if isinstance(node, dict):
        return {
            (str(k) if not isinstance(k, str | int) else k): to_plain(v, _depth + 1)
            for k, v in node.items()
        }
    if isinstance(node, list):
        return [to_plain(v, _depth + 1) for v in node]
    if isinstance(node, bool) or node is None:
        return node
    if isinstance(node, int):
        return int(node)
    if isinstance(node, float):
        return float(node)
    if isinstance(node, str):
        return str(node)
    return str(node)


def _pos_of(tree: Any, loc: tuple) -> tuple[int, int, str]:
    """Follow a pydantic error location through the YAML tree.

    Returns (line, col, dotted path) of the deepest node that exists. Location parts
    that are not in the data (union tags, model names) are skipped.
    """
    line, col = 1, 1
    if isinstance(tree, CommentedMap | CommentedSeq) and tree.lc.line is not None:
        line, col = tree.lc.line + 1, tree.lc.col + 1
    node = tree
    path = ""
    for part in loc:
        if isinstance(node, CommentedMap) and not isinstance(part, int) and part in node:
            try:  # keys merged in with "<<" have no position of their own: keep the parent's
                kl, kc = node.lc.key(part)
                line, col = kl + 1, kc + 1
            except (KeyError, TypeError):
                pass
            node = node[part]
            path = f"{path}.{part}" if path else str(part)
        elif isinstance(node, CommentedSeq) and isinstance(part, int) and 0 <= part < len(node):
            il, ic = node.lc.item(part)
            line, col = il + 1, ic + 1
            node = node[part]
            path = f"{path}[{part}]"
        elif isinstance(node, dict) and part in node:  # plain dict (e.g. flow/merged), no positions
            node = node[part]
            path = f"{path}.{part}" if path else str(part)
        # else: a union tag or model name that is not in the data: skip it
    return line, col, path


# pydantic error type -> (wording, the ctx key whose value it names)
_BOUND_MESSAGES = {
    "less_than_equal": ("must be ≤ {}", "le"),
    "less_than": ("must be < {}", "lt"),
    "greater_than_equal": ("must be ≥ {}", "ge"),
    "greater_than": ("must be > {}", "gt"),
    "too_long": ("at most {} items", "max_length"),
    "too_short": ("at least {} items", "min_length"),
    "literal_error": ("must be {}", "expected"),
}


def _message(err: dict) -> str:
    """Short engineer-friendly wording for pydantic's error types."""
    t = err.get("type", "")
    ctx = err.get("ctx") or {}
    msg = err.get("msg", "invalid")
    if t == "extra_forbidden":
        return "unknown key"
    if t == "missing":
        return "required field is missing"
    if t in _BOUND_MESSAGES:
        text, key = _BOUND_MESSAGES[t]
        return text.format(ctx.get(key))
    if t == "union_tag_invalid":
        return f"unknown kind {ctx.get('tag')!r}; expected one of {ctx.get('expected_tags')}"
    if t in ("value_error", "assertion_error"):
        return msg.removeprefix("Value error, ").removeprefix("Assertion failed, ")
    if t in ("ip_v4_address", "ip_v6_address"):
        return f"{err.get('input')!r} is not a valid {'IPv4' if t == 'ip_v4_address' else 'IPv6'} address"
    return msg[:1].lower() + msg[1:]


def _strip_tags(loc: tuple) -> tuple:
    """Drop pydantic's union/validator tags (e.g. 'function-before[...]', 'fixed') not in data."""
    return tuple(p for p in loc if isinstance(p, int) or ("[" not in p and "-" not in p))


def _path_loc(path: str) -> tuple:
    return tuple(
        int(m.group(2)) if m.group(2) is not None else m.group(1) for m in _TOKEN.finditer(path)
    )


def problems_from_validation(e: ValidationError, tree: Any, filename: str) -> list[Problem]:
    """One positioned Problem per pydantic error, de-duplicated, in file order."""
    out: dict[tuple, Problem] = {}
    for err in e.errors(include_url=False):
        base = _strip_tags(tuple(err.get("loc", ())))
        for msg in _message(err).split("\n"):
            loc = base
            m = _PATH_IN_MSG.match(msg)
            if (
                m
            ):  # a cross-field rule that names its own path, e.g. "streams[1].port: unknown port"
                loc = loc + _path_loc(m.group(1))
                msg = m.group(2)
            line, col, path = _pos_of(tree, loc)
            if err.get("type") == "missing" and loc and not path.endswith(str(loc[-1])):
                path = f"{path}.{loc[-1]}" if path else str(loc[-1])
            key = (line, col, path, msg)
            out.setdefault(key, Problem(filename, line, col, path, msg))
    return sorted(out.values(), key=lambda p: (p.line, p.col, p.field))


def load_profile_text(text: str, filename: str = "<profile>") -> Profile:
    """Parse and validate; raise BadInput carrying positioned problems."""
    tree = parse_yaml(text, filename)
    if tree is None:
        raise BadInput(
            "empty profile",
            [Problem(filename, 1, 1, "", "the file is empty; a profile needs ports: and streams:")],
        )
    try:
        data = to_plain(tree)
    except (ValueError, RecursionError) as e:
        raise BadInput(str(e), [Problem(filename, 1, 1, "", str(e))]) from None
    if not isinstance(data, dict):
        raise BadInput(
            "not a mapping",
            [Problem(filename, 1, 1, "", "a profile is a mapping with ports: and streams:")],
        )
    try:
        return Profile.model_validate(data)
    except ValidationError as e:
        raise BadInput(
            f"{filename}: invalid profile", problems_from_validation(e, tree, filename)
        ) from None
    except (ValueError, TypeError, ArithmeticError, OverflowError) as e:
        raise BadInput(str(e), [Problem(filename, 1, 1, "", str(e))]) from None


def load_profile(path: str | Path) -> Profile:
    """Load a profile file. Unreadable files are bad input (exit 2) too."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise BadInput(
            f"{p}: {e}",
            [Problem(str(p), 1, 1, "", f"cannot read: {getattr(e, 'strerror', None) or e}")],
        ) from None
    return load_profile_text(text, str(p))

"""Load a profile from YAML, keeping line numbers, and turn every problem into a positioned error.

The file is read without blocking and within a size limit (a named pipe, a device or a
directory is refused before it is opened for reading; more than :data:`MAX_PROFILE_BYTES`
is refused unread). ruamel.yaml composes the YAML (its C parser where installed: about
1 MB in a tenth of a second, the pure one is some 50 times slower) into nodes that carry
their line and column; :func:`build_tree` turns them into plain dicts, lists and scalars
(YAML 1.2 core schema) that remember where each key and item came from, with aliases
bounded (:data:`MAX_ALIAS_VALUES`: a "billion laughs" file is refused in milliseconds),
duplicate keys refused at their position, and ``<<`` merge keys applied. pydantic reports
*what* is wrong and *where in the data*; this module joins the two so the user sees
``lab.yaml:14:9: streams[2].vlan[0].id: must be ≤ 4094``. Errors are data
(:class:`~tgen_tui.diagnostics.Problem`) until the CLI renders them (DESIGN rule 9).
"""

from __future__ import annotations

import math
import os
import re
import stat
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from ruamel.yaml import YAML
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.nodes import MappingNode, ScalarNode, SequenceNode
from ruamel.yaml.reader import ReaderError
from ruamel.yaml.resolver import VersionedResolver
from ruamel.yaml.tag import Tag

from tgen_tui.diagnostics import BadInput, Problem
from tgen_tui.profiles.models import Profile

#: the largest profile read (a profile of 65,000 streams is some 15 MB)
MAX_PROFILE_BYTES = 16 << 20
#: values that aliases may add to a document beyond the ones written in it
MAX_ALIAS_VALUES = 100_000
#: nesting of mappings and lists
MAX_DEPTH = 64

_PATH_IN_MSG = re.compile(
    r"^((?:[A-Za-z_][A-Za-z0-9_]*|\[\d+\])(?:\.[A-Za-z_][A-Za-z0-9_]*|\[\d+\])*): (.*)$", re.S
)
_TOKEN = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)|\[(\d+)\]")


# --------------------------------------------------------------------------- the tree
class PosMap(dict):
    """A mapping of the YAML file that knows where it and each of its keys were written:
    :meth:`where` (1-based line and column; a key merged in with ``<<`` has none)."""

    __slots__ = ("mark", "key_marks")

    def __init__(self, mark: Any) -> None:
        super().__init__()
        self.mark = mark
        self.key_marks: dict[Any, Any] = {}

    def where(self, key: Any = None) -> tuple[int, int] | None:
        m = self.mark if key is None else self.key_marks.get(key)
        return None if m is None else (m.line + 1, m.column + 1)


class PosList(list):
    """A list of the YAML file that knows where it and each item were written (:meth:`where`)."""

    __slots__ = ("mark", "item_marks")

    def __init__(self, mark: Any) -> None:
        super().__init__()
        self.mark = mark
        self.item_marks: list[Any] = []

    def where(self, index: int | None = None) -> tuple[int, int]:
        m = self.mark if index is None else self.item_marks[index]
        return m.line + 1, m.column + 1


_PLAIN = Tag(suffix="tag:tgen-tui,2026:plain")  # a plain scalar: resolved by build_tree


class _Resolver(VersionedResolver):
    """Leaves plain scalars to :func:`build_tree` (one regex pass there, instead of the
    versioned resolver's per-scalar look-ups, which cost more than the C parser itself)."""

    def resolve(self, kind: Any, value: Any, implicit: Any) -> Any:
        if kind is ScalarNode:
            return _PLAIN if implicit[0] else self.DEFAULT_SCALAR_TAG
        return self.DEFAULT_SEQUENCE_TAG if kind is SequenceNode else self.DEFAULT_MAPPING_TAG

    @property
    def processing_version(self) -> Any:
        return (1, 2)


# YAML 1.2 core schema, as ruamel.yaml resolves it
_INT = re.compile(r"[-+]?(?:0b[0-1_]+|0o?[0-7_]+|[0-9_]+|0x[0-9a-fA-F_]+)")
_FLOAT = re.compile(
    r"[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?|[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)"
    r"|[-+]?\.[0-9_]+(?:[eE][-+][0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN)"
)
_BOOL = {"true": True, "True": True, "TRUE": True, "false": False, "False": False, "FALSE": False}
_NULL = {"", "~", "null", "Null", "NULL"}


def _int(text: str) -> int:
    s = text.replace("_", "")
    sign = -1 if s[:1] == "-" else 1
    s = s.lstrip("+-")
    for prefix, base in (("0b", 2), ("0x", 16), ("0o", 8)):
        if s.startswith(prefix):
            return sign * int(s[2:], base)
    return sign * int(s, 10)


def _float(text: str) -> float:
    s = text.replace("_", "").lower()
    if s.endswith("nan"):
        return math.nan
    if s.endswith("inf"):
        return -math.inf if s[:1] == "-" else math.inf
    return float(s)


def _plain(text: str) -> Any:
    """A plain (unquoted) scalar as YAML 1.2's core schema reads it."""
    if text in _NULL:
        return None
    b = _BOOL.get(text)
    if b is not None:
        return b
    c = text[0]
    if c in "-+0123456789.":
        if _INT.fullmatch(text):
            return _int(text)
        if _FLOAT.fullmatch(text):
            return _float(text)
    return text


def _tagged(node: ScalarNode) -> Any:
    """A scalar with an explicit tag: the core ones converted, any other kept as text
    (nothing is ever constructed from a tag)."""
    tag, text = node.tag, node.value
    try:
        if tag == "tag:yaml.org,2002:int":
            return _int(text)
        if tag == "tag:yaml.org,2002:float":
            return _float(text)
        if tag == "tag:yaml.org,2002:bool":
            return _BOOL[text]
        if tag == "tag:yaml.org,2002:null":
            return None
    except (ValueError, KeyError):
        short = str(tag).replace("tag:yaml.org,2002:", "!!")
        raise _TreeError(node, f"{short} {text!r} is not a valid {short[2:]}") from None
    return text


class _TreeError(Exception):
    def __init__(self, node: Any, message: str) -> None:
        super().__init__(message)
        self.line = node.start_mark.line + 1
        self.col = node.start_mark.column + 1
        self.message = message


class _Builder:
    """Nodes to a tree of PosMap/PosList/scalars. An alias is the same object as its
    anchor; the values it adds (its anchor's subtree, expanded) are counted, and more
    than MAX_ALIAS_VALUES in all is refused at the alias that passes the bound."""

    def __init__(self) -> None:
        self.built: dict[int, tuple[Any, int]] = {}  # id(node) -> (value, expanded size)
        self.open: set[int] = set()
        self.alias_values = 0

    def scalar(self, node: ScalarNode) -> Any:
        tag = node.ctag
        if tag is _PLAIN:
            text = node.value
            if text.isdigit():  # the common case: a decimal number
                return int(text)
            return _plain(text)
        if tag is _Resolver.DEFAULT_SCALAR_TAG:  # quoted
            return node.value
        return _tagged(node)

    def build(self, node: Any, depth: int = 0) -> tuple[Any, int]:
        if isinstance(node, ScalarNode):
            return self.scalar(node), 1
        key = id(node)
        got = self.built.get(key)
        if got is not None:  # an alias
            self.alias_values += got[1]
            if self.alias_values > MAX_ALIAS_VALUES:
                raise _TreeError(
                    node,
                    f"YAML aliases expand to more than {MAX_ALIAS_VALUES:,} values (the limit "
                    "of a profile; an alias bomb?)",
                )
            return got
        if key in self.open:
            raise _TreeError(node, "a YAML alias refers to a node that contains it (recursive)")
        if depth >= MAX_DEPTH:
            raise _TreeError(node, f"nested more than {MAX_DEPTH} levels deep")
        self.open.add(key)
        out: PosMap | PosList
        if isinstance(node, MappingNode):
            out, size = self._mapping(node, depth)
        else:
            seq = PosList(node.start_mark)
            marks = seq.item_marks
            size = 1
            for item in node.value:
                if isinstance(item, ScalarNode):
                    v, n = self.scalar(item), 1
                else:
                    v, n = self.build(item, depth + 1)
                seq.append(v)
                marks.append(item.start_mark)
                size += n
            out = seq
        self.open.discard(key)
        self.built[key] = (out, size)
        return out, size

    def _mapping(self, node: MappingNode, depth: int) -> tuple[PosMap, int]:
        m = PosMap(node.start_mark)
        marks = m.key_marks
        size = 1
        merges: list[Any] = []
        for knode, vnode in node.value:
            if not isinstance(knode, ScalarNode):
                raise _TreeError(knode, "a key must be a plain value, not a list or a mapping")
            if knode.ctag is _PLAIN and knode.value == "<<":
                merges.append(vnode)
                continue
            k = self.scalar(knode)
            if not isinstance(k, str | int) or isinstance(k, bool):
                k = str(k)
            if k in m:
                first = marks[k].line + 1
                raise _TreeError(knode, f'found duplicate key "{k}" (first given on line {first})')
            if isinstance(vnode, ScalarNode):
                m[k] = self.scalar(vnode)
                size += 2
            else:
                v, n = self.build(vnode, depth + 1)
                m[k] = v
                size += 1 + n
            marks[k] = knode.start_mark
        for mnode in merges:  # keys written in the mapping win, then the first merged
            sources = mnode.value if isinstance(mnode, SequenceNode) else [mnode]
            for src in sources:
                v, n = self.build(src, depth + 1)
                if not isinstance(v, PosMap):
                    raise _TreeError(src, "<< merges a mapping (or a list of mappings) only")
                for k, x in v.items():
                    if k not in m:
                        m[k] = x
                size += n
        return m, size


def build_tree(root: Any) -> Any:
    """The document's node graph as PosMap/PosList/scalars (see :class:`_Builder`)."""
    return _Builder().build(root)[0]


def _compose(text: str) -> Any:
    """The document's root node (None for an empty one), by the C parser where
    ruamel.yaml.clibz (or the older ruamel.yaml.clib) is installed, else the pure one."""
    if _CLoader is not None:
        loader = _CLoader(text)
        try:
            return loader.get_single_node()
        except MarkedYAMLError:
            # libyaml follows YAML 1.1 where 1.2 is wider: an unquoted IPv6 address or MAC
            # in a flow mapping ({ipv6: 2001:2::2/64}) is valid 1.2 that it refuses. The
            # pure parser decides (and gives the error, if it is one).
            pass
        finally:
            loader.dispose()
    y = YAML(typ="safe", pure=True)
    y.Resolver = _Resolver
    return y.compose(text)


def _c_loader() -> Any:
    try:
        from ruamel.yaml.cyaml import CParser
    except ImportError:  # no C extension: the pure parser
        return None
    from ruamel.yaml.constructor import BaseConstructor

    class CLoader(CParser, BaseConstructor, _Resolver):  # type: ignore[misc,valid-type]
        def __init__(self, stream: str) -> None:
            CParser.__init__(self, stream)
            self._parser = self._composer = self
            BaseConstructor.__init__(self, loader=self)
            _Resolver.__init__(self, version=(1, 2), loadumper=self)

    return CLoader


_CLoader = _c_loader()


def _problem(filename: str, line: int, col: int, msg: str) -> BadInput:
    return BadInput(msg, [Problem(filename, line, col, "", f"YAML: {msg}")])


def parse_yaml(text: str, filename: str) -> Any:
    """Parse YAML text into a position-carrying tree (:class:`PosMap`, :class:`PosList`,
    scalars); syntax errors, duplicate keys, recursive aliases and alias bombs become
    BadInput."""
    try:
        root = _compose(text)
        return None if root is None else build_tree(root)
    except _TreeError as e:
        raise _problem(filename, e.line, e.col, e.message) from None
    except ReaderError as e:  # a character YAML does not allow (NUL, U+FFFE, ...)
        before = text[: max(0, e.position)]
        line = before.count("\n") + 1
        col = len(before) - (before.rfind("\n") + 1) + 1
        msg = (
            f"unacceptable character #x{e.character:04x}: {e.reason}"
            if isinstance(e.character, int)
            else str(e.reason)
        )
        raise _problem(filename, line, col, msg) from None
    except MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        msg = " ".join(x for x in (e.context, e.problem) if x) or "invalid YAML"
        raise _problem(filename, line, col, msg) from None
    except RecursionError:
        raise _problem(filename, 1, 1, f"nested more than {MAX_DEPTH} levels deep") from None
    except (YAMLError, Exception) as e:  # noqa: BLE001 - any parser failure is bad input, not a crash
        msg = " ".join(str(e).split())
        raise _problem(filename, 1, 1, msg) from None


def _pos_of(tree: Any, loc: tuple) -> tuple[int, int, str]:
    """Follow a pydantic error location through the YAML tree.

    Returns (line, col, dotted path) of the deepest node that exists. Location parts
    that are not in the data (union tags, model names) are skipped.
    """
    line, col = 1, 1
    if isinstance(tree, PosMap | PosList):
        line, col = tree.where() or (1, 1)
    node = tree
    path = ""
    for part in loc:
        if isinstance(node, dict) and not isinstance(part, int) and part in node:
            if isinstance(node, PosMap):  # a key merged in with "<<": the parent's
                line, col = node.where(part) or (line, col)
            node = node[part]
            path = f"{path}.{part}" if path else str(part)
        elif isinstance(node, PosList) and isinstance(part, int) and 0 <= part < len(node):
            line, col = node.where(part)
            node = node[part]
            path = f"{path}[{part}]"
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            node = node[part]
            path = f"{path}[{part}]"
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


def _message(err: Any) -> str:
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
    if len(text) > MAX_PROFILE_BYTES:
        raise _too_big(filename, len(text.encode("utf-8", "surrogatepass")))
    tree = parse_yaml(text, filename)
    if tree is None:
        raise BadInput(
            "empty profile",
            [Problem(filename, 1, 1, "", "the file is empty; a profile needs ports: and streams:")],
        )
    if not isinstance(tree, dict):
        raise BadInput(
            "not a mapping",
            [Problem(filename, 1, 1, "", "a profile is a mapping with ports: and streams:")],
        )
    try:
        prof = Profile.model_validate(tree)
    except ValidationError as e:
        raise BadInput(
            f"{filename}: invalid profile", problems_from_validation(e, tree, filename)
        ) from None
    except (ValueError, TypeError, ArithmeticError, OverflowError, RecursionError) as e:
        raise BadInput(str(e), [Problem(filename, 1, 1, "", str(e))]) from None
    problems = resolve_captures(prof, filename, tree)
    if problems:
        raise BadInput(f"{filename}: invalid profile", problems)
    return prof


def position_of(filename: str, loc: tuple, message: str) -> Problem:
    """``message`` positioned at ``loc`` (a path of keys and indexes) of the profile file
    ``filename`` (line 1 when the file cannot be read again)."""
    try:
        tree = parse_yaml(read_bounded(filename), filename)
    except BadInput:
        tree = None
    loc = tuple(int(p) if isinstance(p, str) and p.isdigit() else p for p in loc)
    line, col, path = _pos_of(tree, loc)
    want = ".".join(str(p) for p in loc if not isinstance(p, int))
    if not path.endswith(want.split(".")[-1]):
        path = _dotted(loc)
    return Problem(filename, line, col, path, message)


def _dotted(loc: tuple) -> str:
    out = ""
    for p in loc:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out


def resolve_captures(prof: Profile, filename: str, tree: Any) -> list[Problem]:
    """Make every ``pcap.file`` absolute (relative to the profile's folder; ``<...>``
    names: the current one) and check that it is a readable file (positioned problems)."""
    here = Path(filename).parent if not filename.startswith("<") else Path(".")
    out = []
    for i, s in enumerate(prof.streams):
        if s.pcap is None:
            continue
        p = Path(s.pcap.file).expanduser()
        p = (p if p.is_absolute() else here / p).resolve()
        why = None if p.is_file() else "no such file" if not p.exists() else "not a file"
        if why is None and not os.access(p, os.R_OK):
            why = "not readable"
        if why is not None:
            line, col, path = _pos_of(tree, ("streams", i, "pcap", "file"))
            out.append(Problem(filename, line, col, path, f"{p}: {why} (a pcap or pcapng file)"))
            continue
        s.pcap.file = str(p)
    return out


def _too_big(filename: str, size: int) -> BadInput:
    msg = (
        f"cannot read: {size / (1 << 20):,.1f} MiB; a profile is at most "
        f"{MAX_PROFILE_BYTES >> 20} MiB"
    )
    return BadInput(f"{filename}: {msg}", [Problem(filename, 1, 1, "", msg)])


_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def _not_a_file(filename: str, mode: int) -> BadInput | None:
    if stat.S_ISREG(mode):
        return None
    kind = next((what for test, what in _KINDS if test(mode)), "not a regular file")
    msg = f"cannot read: {kind}, not a profile file"
    return BadInput(f"{filename}: {msg}", [Problem(filename, 1, 1, "", msg)])


def read_bounded(path: str | Path, limit: int = MAX_PROFILE_BYTES) -> str:
    """The text of a regular file of at most ``limit`` bytes, read without blocking: a
    directory, a named pipe or a device is refused before it is read (a pipe is never
    waited on), a larger file unread; BadInput (exit 2) with one positioned line."""
    name = str(path)

    def bad(e: BaseException) -> BadInput:
        why = getattr(e, "strerror", None) or str(e)
        return BadInput(f"{name}: {why}", [Problem(name, 1, 1, "", f"cannot read: {why}")])

    try:
        st = os.stat(path)
        err = _not_a_file(name, st.st_mode)
        if err is not None:
            raise err
        if st.st_size > limit:
            raise _too_big(name, st.st_size)
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as e:
        raise bad(e) from None
    try:
        st = os.fstat(fd)  # what was opened, not what was looked at
        err = _not_a_file(name, st.st_mode)
        if err is not None:
            raise err
        chunks, got = [], 0
        while got <= limit:
            b = os.read(fd, min(1 << 20, limit + 1 - got))
            if not b:
                break
            chunks.append(b)
            got += len(b)
    except OSError as e:
        raise bad(e) from None
    finally:
        os.close(fd)
    if got > limit:
        raise _too_big(name, got)
    try:
        return b"".join(chunks).decode("utf-8")
    except UnicodeDecodeError as e:
        raise bad(e) from None


def load_profile(path: str | Path) -> Profile:
    """Load a profile file. Unreadable files are bad input (exit 2) too."""
    return load_profile_text(read_bounded(path), str(path))


def load_profile_checked(path: str | Path) -> tuple[Profile, list[Problem]]:
    """Load a profile file and its warnings (:mod:`tgen_tui.profiles.lint`), each
    positioned like an error, its message starting ``warning:``."""
    from tgen_tui.profiles.lint import profile_warnings

    text, name = read_bounded(path), str(path)
    prof = load_profile_text(text, name)
    found = profile_warnings(prof)
    if not found:
        return prof, []
    tree = parse_yaml(text, name)
    out = []
    for w in found:
        m = _PATH_IN_MSG.match(w)
        loc, msg = (_path_loc(m.group(1)), m.group(2)) if m else ((), w)
        line, col, field = _pos_of(tree, loc)
        out.append(Problem(name, line, col, field, f"warning: {msg}"))
    return prof, out

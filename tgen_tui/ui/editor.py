"""The profile editor: a form over every profile field, validated as you type.

Each field is an Input holding the field's value as one line of YAML (``64``,
``{min: 10000, max: 10255, mode: inc}``, ``[{id: 35}]``), so every field of the schema
can be edited, nested ones included. After each keystroke the edited round-trip tree is
validated with the same loader and pydantic models as ``tgen validate``; each problem is
shown under the field it names, and Save stays disabled while any remain. Saving writes
the round-trip tree, so comments and key order survive. Applying a saved profile to the
running console changes rates live (``set_rate``) when only rates changed, and reloads
the engine (``reload``) otherwise.
"""

from __future__ import annotations

import copy
import dataclasses
import io
import json
import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from rich.text import Text
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import Input, Label, OptionList, Static

from tgen_tui import fmt
from tgen_tui.diagnostics import BadInput, Problem
from tgen_tui.profiles import models as m
from tgen_tui.profiles.loader import load_profile_text
from tgen_tui.profiles.units import line_rate_fps
from tgen_tui.ui.widgets import OrderedFooter

# sub-models shown one level expanded (their fields get an input each)
EXPAND: dict[str, type[BaseModel]] = {
    "eth": m.Ethernet,
    "ipv4": m.IPv4,
    "ipv6": m.IPv6,
    "udp": m.UDP,
    "tcp": m.TCP,
    "schedule": m.Schedule,
}
PROFILE_FIELDS = ("name", "description", "seed", "duration")
# the stream fields an operator edits most come first (the rest follow in schema order)
FIRST = {
    f: i
    for i, f in enumerate(("name", "port", "rx_port", "rate", "size", "vlan", "mode", "schedule"))
}
_TOKEN = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)|\[(\d+)\]")

Path_ = tuple[Any, ...]


def flow(value: Any) -> str:
    """One line of YAML for a node (flow style), '' for an absent one."""
    if value is None:
        return ""
    y = YAML(typ="rt")
    y.default_flow_style = True
    y.width = 4096
    buf = io.StringIO()
    y.dump(_plain(value), buf)
    text = buf.getvalue().strip()
    return text.removesuffix("...").strip()


def _plain(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _plain(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_plain(v) for v in node]
    if isinstance(node, bool | int | float) or node is None:
        return node
    return str(node)


def parse_flow(text: str) -> Any:
    """The YAML value typed into a field; raises ValueError with YAML's message."""
    y = YAML(typ="rt")
    try:
        return y.load(io.StringIO(text))
    except Exception as e:  # noqa: BLE001 - any YAML error is a message next to the field
        raise ValueError("YAML: " + " ".join(str(e).split())[:160]) from None


def path_of(field: str) -> Path_:
    """``streams[0].vlan[0].id`` → ('streams', 0, 'vlan', 0, 'id')."""
    return tuple(int(g2) if g2 else g1 for g1, g2 in _TOKEN.findall(field))


def dotted(path: Path_) -> str:
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out


def get_in(tree: Any, path: Path_) -> Any:
    node = tree
    for p in path:
        try:
            node = node[p]
        except (KeyError, IndexError, TypeError):
            return None
    return node


def set_in(tree: Any, path: Path_, value: Any) -> None:
    """Set (or delete, with value None) a node, creating missing parent mappings."""
    node = tree
    for p in path[:-1]:
        if isinstance(node, dict) and p not in node:
            if value is None:
                return
            node[p] = CommentedMap()
        node = node[p]
    last = path[-1]
    if value is None:
        if isinstance(node, dict):
            node.pop(last, None)
        return
    if isinstance(node, dict) and last in node:
        node[last] = value  # keeps the key's position and its comments
    elif isinstance(node, CommentedSeq | list):
        node[last] = value
    else:
        node[last] = value


class RoundTrip:
    """Load and dump a profile keeping comments, order, quotes and the file's indentation."""

    STYLES = ((2, 4, 2), (2, 2, 0), (4, 4, 2), (4, 6, 4), (4, 4, 0))

    def __init__(self, text: str) -> None:
        self.yaml = self._make(2, 4, 2)
        for style in self.STYLES:  # the indentation that reproduces the file exactly
            y = self._make(*style)
            try:
                buf = io.StringIO()
                y.dump(y.load(io.StringIO(text)), buf)
            except Exception:  # noqa: BLE001 - a file that does not load keeps the default
                break
            if buf.getvalue() == text:
                self.yaml = y
                break

    @staticmethod
    def _make(mapping: int, sequence: int, offset: int) -> YAML:
        y = YAML(typ="rt")
        y.preserve_quotes = True
        y.width = 4096
        y.indent(mapping=mapping, sequence=sequence, offset=offset)
        return y

    def load(self, text: str) -> Any:
        return self.yaml.load(io.StringIO(text))

    def dump(self, tree: Any) -> str:
        buf = io.StringIO()
        self.yaml.dump(tree, buf)
        return buf.getvalue()


def per_core_pps(root: Path | None = None) -> float | None:
    """The worker's measured send rate on this machine (benchmarks/results/tx_vs_trafgen.json)."""
    p = (root or Path.cwd()) / "benchmarks" / "results" / "tx_vs_trafgen.json"
    try:
        return float(json.loads(p.read_text())["median_kpps"]["tgen_worker"]) * 1000.0
    except (OSError, KeyError, ValueError, TypeError):
        return None


@dataclasses.dataclass
class Derived:
    """Figures derived from a valid stream, for the operator's sanity check."""

    flows: int
    pps: float
    line_pct: float
    core_pct: float | None
    new_flows_s: float
    first_pass_s: float
    entries: int
    fill_s: float | None
    ct_max: int | None
    timeout_s: float | None
    mean_size: float = 0.0
    size_note: str = ""  # an IMIX preset's definition
    shape: str = ""  # a rate shape in a few words
    mix_share: str = ""  # an IMIX's sizes by their share of the bits on the wire

    def lines(self) -> list[str]:
        out = [
            f"distinct flows      {fmt.count(self.flows)}",
            f"frame size          mean {self.mean_size:,.1f} B incl. FCS"
            + (f" ({self.size_note})" if self.size_note else ""),
            f"rate                {fmt.pps(self.pps)}  = {fmt.pct(self.line_pct, 3)} of line rate"
            + (
                f", {fmt.pct(self.core_pct, 1)} of one core's measured send rate"
                if self.core_pct is not None
                else ""
            ),
            f"new flows/s         {self.new_flows_s:,.0f} for the first {fmt.seconds(self.first_pass_s)}"
            + (
                ", then 0 (flows repeat within the timeout)"
                if self.timeout_s is None or self.first_pass_s <= self.timeout_s
                else ", then again as entries expire"
            ),
            f"conntrack entries   ~{fmt.count(self.entries)}"
            + (f" of max {fmt.count(self.ct_max)}" if self.ct_max else "")
            + (f" (UDP timeout {self.timeout_s:g} s)" if self.timeout_s else ""),
        ]
        if self.mix_share:
            out.insert(2, f"line-rate share     {self.mix_share}")
        if self.shape:
            out.insert(3, f"rate over time      {self.shape} (the rate above is its peak)")
        if self.fill_s is not None:
            out.append(
                f"table would fill    after {fmt.seconds(self.fill_s)}: new flows will be dropped"
            )
        return out


def derive(
    prof: m.Profile,
    stream: m.Stream,
    pps: float,
    ct_max: int | None,
    timeout_s: float | None,
    core_pps: float | None,
) -> Derived:
    flows = stream.distinct_flows()
    _, _, mean = m.size_bounds(stream.size)
    speed = prof.ports[stream.port].speed if stream.port in prof.ports else 10e9
    top = line_rate_fps(speed, mean)
    first = flows / pps if pps > 0 else float("inf")
    entries = flows if timeout_s is None else min(flows, int(pps * timeout_s))
    fill = None
    if ct_max and entries > ct_max and pps > 0:
        fill = ct_max / pps
    return Derived(
        flows=flows,
        pps=pps,
        line_pct=100.0 * pps / top if top else 0.0,
        core_pct=100.0 * pps / core_pps if core_pps else None,
        new_flows_s=pps if flows > 1 or entries else 0.0,
        first_pass_s=first,
        entries=entries,
        fill_s=fill,
        ct_max=ct_max,
        timeout_s=timeout_s,
        mean_size=mean,
        size_note=_size_note(stream.size),
        shape=stream.shape_text(speed),
        mix_share=mix_share(stream.size),
    )


def mix_share(size) -> str:
    """An IMIX's sizes by their share of the line rate (the bits each size puts on the
    wire, with preamble and gap: frames of 1518 B take most of it, 64 B ones little)."""
    if not isinstance(size, m.ImixSize):
        return ""
    merged: dict[int, int] = {}
    for sz, w in size.entries:
        merged[sz] = merged.get(sz, 0) + w
    bits = {sz: w * (sz + m.L1_OVERHEAD) for sz, w in merged.items()}
    total = sum(bits.values()) or 1
    return ", ".join(f"{sz} B {100.0 * b / total:.1f} %" for sz, b in sorted(bits.items()))


def _size_note(size) -> str:
    if isinstance(size, m.ImixSize):
        if isinstance(size.imix, str):
            return f"imix {size.imix}: {m.IMIX_NOTES.get(size.imix, '')}"
        return f"imix of {len(size.imix)} sizes"
    if isinstance(size, m.RangeSize):
        return f"{size.min}-{size.max} B, {size.mode}"
    if isinstance(size, m.LawSize):
        return f"{size.dist} law, mean {size.mean:g} B before clipping to {size.min}-{size.max} B"
    return ""


class FieldRow(Vertical):
    """One field: its path and a one-line YAML input side by side, its error underneath."""

    DEFAULT_CSS = """
    FieldRow { height: auto; }
    FieldRow Horizontal { height: 1; }
    FieldRow Label.name { width: 18; color: $text-muted; }
    FieldRow Input { height: 1; border: none; padding: 0 1; width: 1fr; }
    FieldRow Input:focus { background: $boost; border: none; }
    FieldRow Static.fielderror { color: $error; height: auto; padding: 0 0 0 2; }
    FieldRow.bad Label.name { color: $error; }
    """

    def __init__(self, path: Path_, value: str, hint: str) -> None:
        super().__init__()
        self.path = path
        self.value = value
        self.hint = hint
        self.error = ""

    def compose(self) -> ComposeResult:
        name = dotted(self.path[2:] if self.path[:1] in (("streams",), ("ports",)) else self.path)
        with Horizontal():
            yield Label(name, classes="name")
            inp = Input(self.value, placeholder=f"(default) {self.hint}", classes="field")
            inp.tooltip = f"{dotted(self.path)}: {self.hint}" if self.hint else dotted(self.path)
            yield inp
        err = Static(Text(self.error), classes="fielderror")
        err.display = bool(self.error)
        yield err

    def show_error(self, text: str) -> None:
        if text == self.error:
            return
        self.error = text
        self.set_class(bool(text), "bad")
        for w in self.query(".fielderror"):
            w.update(Text(text))  # type: ignore[attr-defined]
            w.display = bool(text)


class EditorScreen(Screen):
    """Edit a profile: sections on the left, fields on the right, derived figures below."""

    BINDINGS = [
        Binding("ctrl+s", "save", "Save", id="editor.save"),
        Binding("ctrl+r", "apply", "Save+apply", id="editor.apply"),
        Binding("escape", "close", "Close", id="editor.close"),
    ]
    DEFAULT_CSS = """
    EditorScreen #sections { width: 20; height: auto; max-height: 100%; }
    EditorScreen #form { width: 1fr; }
    EditorScreen #derived { height: auto; max-height: 8; background: $boost; }
    EditorScreen #status { height: 1; }
    """

    def __init__(self, path: str) -> None:
        super().__init__()
        self.path = path
        text = Path(path).read_text(encoding="utf-8")
        self.rt = RoundTrip(text)
        self.original = self.rt.load(text)
        self.etree = copy.deepcopy(self.original)
        self.edits: dict[Path_, str] = {}
        self.problems: list[Problem] = []
        self.field_errors: dict[Path_, str] = {}
        self.profile: m.Profile | None = None
        self.sections = self._sections()
        self.section = 0
        self.saved_text: str | None = None

    # ------------------------------------------------------------------ layout
    def _sections(self) -> list[tuple[str, Path_]]:
        out: list[tuple[str, Path_]] = [("profile", ())]
        for name in self.original.get("ports", {}) or {}:
            out.append((f"port {name}", ("ports", name)))
        for i, s in enumerate(self.original.get("streams", []) or []):
            nm = s.get("name", i) if isinstance(s, dict) else i
            out.append((f"stream {nm}", ("streams", i)))
        out.append(("dut", ("dut",)))
        return out

    def _fields(self, base: Path_) -> list[tuple[Path_, str]]:
        if base == ():
            return [((f,), (m.Profile.model_fields[f].description or "")) for f in PROFILE_FIELDS]
        if base[0] == "ports":
            return [(base + (f,), fi.description or "") for f, fi in m.Port.model_fields.items()]
        if base[0] == "dut":
            return [(base + (f,), fi.description or "") for f, fi in m.Dut.model_fields.items()]
        out = []
        node = get_in(self.etree, base) or {}
        fields = sorted(m.Stream.model_fields.items(), key=lambda kv: FIRST.get(kv[0], len(FIRST)))
        for f, fi in fields:
            if f in ("pcap", "rewrite") and f not in node:
                continue  # a replayed capture's fields: only on the streams that have them
            sub = EXPAND.get(f)
            if sub is not None and isinstance(node.get(f), dict):
                for g, gi in sub.model_fields.items():
                    out.append((base + (f, g), gi.description or ""))
            else:
                out.append((base + (f,), fi.description or ""))
        return out

    def compose(self) -> ComposeResult:
        yield Static(f" editor: {self.path}", classes="title", id="etitle")
        with Horizontal():
            yield OptionList(*[s[0] for s in self.sections], id="sections")
            form = VerticalScroll(id="form")
            form.can_focus = False  # Tab goes from the sections straight to the first field
            yield form
        yield Static("", id="derived")
        yield Static("", id="status")
        yield OrderedFooter()

    async def on_mount(self) -> None:
        self.validate()
        await self._show_section(0)

    async def _show_section(self, i: int) -> None:
        self.section = i
        form = self.query_one("#form", VerticalScroll)
        await form.remove_children()
        base = self.sections[i][1]
        rows = []
        for path, hint in self._fields(base):
            text = self.edits.get(path)
            if text is None:
                text = flow(get_in(self.etree, path))
            rows.append(FieldRow(path, text, hint[:60]))
        await form.mount_all(rows)
        self._paint_errors()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        """Enter on a section jumps to its first field."""
        inputs = list(self.query_one("#form", VerticalScroll).query(Input))
        if inputs:
            inputs[0].focus()

    async def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        if event.option_list.id == "sections" and event.option_index != self.section:
            await self._show_section(event.option_index)
            self._paint_derived()

    # ------------------------------------------------------------------ validation
    def on_input_changed(self, event: Input.Changed) -> None:
        row = next((a for a in event.input.ancestors if isinstance(a, FieldRow)), None)
        if row is None:
            return
        self.edits[row.path] = event.value
        self.validate()

    def build_tree(self) -> tuple[Any, dict[Path_, str]]:
        """The original tree with every edit applied; YAML errors per field."""
        tree = copy.deepcopy(self.original)
        errors: dict[Path_, str] = {}
        for path, text in self.edits.items():
            if flow(get_in(self.original, path)) == text:
                continue  # unchanged: keep the original node (and its style)
            if not text.strip():
                set_in(tree, path, None)
                continue
            try:
                set_in(tree, path, parse_flow(text))
            except ValueError as e:
                errors[path] = str(e)
        return tree, errors

    def validate(self) -> bool:
        tree, errors = self.build_tree()
        self.etree = tree
        self.field_errors = dict(errors)
        self.problems = []
        self.profile = None
        if not errors:
            try:
                self.profile = load_profile_text(self.rt.dump(tree), self.path)
            except BadInput as e:
                self.problems = e.problems or [Problem(self.path, 1, 1, "", str(e))]
        self._paint_errors()
        self._paint_derived()
        return self.valid

    @property
    def valid(self) -> bool:
        return not self.field_errors and not self.problems and self.profile is not None

    def _row_for(self, path: Path_) -> Path_ | None:
        """The displayed field whose path is the longest prefix of ``path``."""
        best: Path_ | None = None
        for row in self.query(FieldRow):
            p = row.path
            if path[: len(p)] == p and (best is None or len(p) > len(best)):
                best = p
        return best

    def _paint_errors(self) -> None:
        by_row: dict[Path_, list[str]] = {}
        other: list[str] = []
        for path, msg in self.field_errors.items():
            by_row.setdefault(path, []).append(msg)
        for pr in self.problems:
            path = path_of(pr.field)
            row = self._row_for(path) if path else None
            line = f"{pr.field}: {pr.message}" if pr.field else pr.message
            if row is not None:
                by_row.setdefault(row, []).append(line)
            else:
                other.append(pr.render())
        for field_row in self.query(FieldRow):
            field_row.show_error("\n".join(by_row.get(field_row.path, [])))
        status = self.query_one("#status", Static)
        n = len(self.field_errors) + len(self.problems)
        if n:
            first = other[0] if other else next(iter(v[0] for v in by_row.values()), "")
            status.update(Text(f"{n} problem(s), cannot save: {first}", style="bold red"))
        else:
            changed = " (unsaved changes)" if self._dirty() else ""
            status.update(
                Text(
                    f"valid{changed}: ctrl+s saves, ctrl+r saves and applies, esc closes",
                    style="green",
                )
            )

    def _dirty(self) -> bool:
        return self.rt.dump(self.etree) != self.rt.dump(self.original)

    def _paint_derived(self) -> None:
        box = self.query_one("#derived", Static)
        base = self.sections[self.section][1]
        if self.profile is None:
            box.update(Text("derived figures appear when the profile is valid", style="dim"))
            return
        if not base or base[0] != "streams":
            tot = sum(s.distinct_flows() for s in self.profile.streams if s.enabled)
            box.update(
                f"{len(self.profile.streams)} streams, {fmt.count(tot)} distinct flows in all; choose a stream for its figures"
            )
            return
        s = self.profile.streams[base[1]]
        from tgen_tui.packets.compile import compile_profile

        compiled = compile_profile(self.profile)
        pps = next((p.schedule.pps for p in compiled.streams if p.name == s.name), 0.0)
        ct_max, timeout = self._dut_limits()
        d = derive(self.profile, s, pps, ct_max, timeout, per_core_pps())
        box.update("\n".join(d.lines()))

    def _dut_limits(self) -> tuple[int | None, float | None]:
        snap = getattr(self.app, "snap", None)
        dut = getattr(snap, "dut", None)
        if dut is None:
            return None, None
        settings = dict(dut.settings)
        timeout = settings.get("udp_timeout")
        try:
            t = float(timeout) if timeout is not None else None
        except ValueError:
            t = None
        return dut.conntrack_max, t

    # ------------------------------------------------------------------ actions
    def action_save(self) -> bool:
        if not self.validate():
            self.notify("not saved: fix the problems shown next to the fields", severity="error")
            return False
        text = self.rt.dump(self.etree)
        Path(self.path).write_text(text, encoding="utf-8")
        self.original = copy.deepcopy(self.etree)
        self.edits = {}
        self.saved_text = text
        self.notify(f"saved {self.path}")
        self._paint_errors()
        return True

    def action_apply(self) -> None:
        if not self.action_save():
            return
        app = self.app
        eng = app._eng() if hasattr(app, "_eng") else None  # type: ignore[attr-defined]
        if eng is None or self.profile is None or getattr(app, "profile_path", None) != self.path:
            self.notify("saved; not applied (the console runs another profile or no engine)")
            return
        from tgen_tui.packets.compile import compile_profile

        new = compile_profile(self.profile)
        old = app.compiled  # type: ignore[attr-defined]
        changes = rate_only_changes(old, new)
        if changes is not None:
            for name, pps in changes.items():
                app.host.submit(eng.set_rate, name, pps)  # type: ignore[attr-defined]
            app.compiled = new  # type: ignore[attr-defined]
            self.notify(f"applied live: rate of {', '.join(changes) or 'nothing'}")
            return
        fut = app.host.submit(eng.reload, new)  # type: ignore[attr-defined]

        def reloaded(f) -> None:
            if not f.cancelled() and f.exception() is None:
                app.compiled = new  # type: ignore[attr-defined]
                app.desc = None  # type: ignore[attr-defined]  # screens rebuild from describe()

        fut.add_done_callback(reloaded)
        self.notify("applied: the engine reloads the profile (ports stop)")

    def action_close(self) -> None:
        self.app.pop_screen()


def rate_only_changes(old, new) -> dict[str, float] | None:
    """{stream: new pps} if the two compiled profiles differ only in stream rates, else None."""
    if (
        old is None
        or old.ports != new.ports
        or [s.name for s in old.streams] != [s.name for s in new.streams]
    ):
        return None
    out = {}
    for a, b in zip(old.streams, new.streams, strict=True):
        if dataclasses.replace(
            a, schedule=dataclasses.replace(a.schedule, pps=0.0)
        ) != dataclasses.replace(b, schedule=dataclasses.replace(b.schedule, pps=0.0)):
            return None
        if a.schedule.pps != b.schedule.pps:
            out[b.name] = b.schedule.pps
    return out


__all__ = ["EditorScreen", "derive", "flow", "parse_flow", "rate_only_changes"]

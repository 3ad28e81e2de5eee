"""DUT hooks: the profile's ``dut.hooks`` commands, run over the DUT channel (issue 19).

``before_run`` / ``after_run`` run around ``tgen run`` (and a methodology run);
``before_trial`` / ``after_trial`` around every methodology trial (RFC 9693 asks for a
DUT state reset per trial). Each is a shell command run with :meth:`DutChannel.run`
(``ip netns exec NS sh -c CMD`` or the ssh prefix) under its timeout. Every run is kept
(:class:`HookRecord`: command, exit status, output, seconds) for the result and the trial
records; a hook that fails or times out raises :class:`HookFailed`, whose message carries
its output, and the run stops.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from tgen_tui.diagnostics import EnvironmentProblem
from tgen_tui.dut.channel import DutChannel, pick_dut

HOOK_NAMES = ("before_run", "after_run", "before_trial", "after_trial")
MAX_KEPT = 4000  # characters of stdout/stderr kept per run


@dataclass(frozen=True)
class HookRecord:
    """One run of a hook."""

    hook: str
    command: str
    returncode: int
    stdout: str
    stderr: str
    seconds: float
    timed_out: bool
    trial: int | None = None  # the methodology trial it ran for

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out

    def to_dict(self) -> dict:
        d = asdict(self)
        d["ok"] = self.ok
        return d


class HookFailed(EnvironmentProblem):
    """A hook exited non-zero or timed out; the message holds its output."""

    def __init__(self, rec: HookRecord, source: str) -> None:
        how = "timed out" if rec.timed_out else f"failed (exit {rec.returncode})"
        out = (rec.stderr.strip() or rec.stdout.strip() or "no output").splitlines()
        text = "\n".join(f"  | {ln}" for ln in out[-20:])
        super().__init__(f"DUT hook {rec.hook} `{rec.command}` over {source} {how}:\n{text}")
        self.record = rec


def _spec(h: Any) -> tuple[str, float] | None:
    """(command, timeout_s) of a hook given as a model, a dict or a string."""
    if h is None:
        return None
    if isinstance(h, str):
        return h, 30.0
    if isinstance(h, dict):
        return str(h["command"]), float(h.get("timeout_s", 30.0))
    return str(h.command), float(h.timeout_s)


class Hooks:
    """The hooks of one run, with every run of them kept in order."""

    def __init__(
        self, channel: DutChannel | None, specs: dict[str, tuple[str, float]] | None = None
    ) -> None:
        self.channel = channel
        self.specs = dict(specs or {})
        self.records: list[HookRecord] = []

    @classmethod
    def of(cls, hooks: Any, channel: DutChannel | None) -> Hooks:
        """From a profile's ``dut.hooks`` (model or dict; None: no hooks)."""
        specs = {}
        for name in HOOK_NAMES:
            h = hooks.get(name) if isinstance(hooks, dict) else getattr(hooks, name, None)
            s = _spec(h)
            if s is not None:
                specs[name] = s
        if specs and channel is None:
            raise EnvironmentProblem(
                f"dut.hooks ({', '.join(specs)}) need a DUT channel: dut.netns or dut.ssh "
                "in the profile, --dut-netns or --dut-ssh"
            )
        return cls(channel, specs)

    def has(self, name: str) -> bool:
        return name in self.specs

    def run(self, name: str, trial: int | None = None) -> HookRecord | None:
        """Run hook ``name`` if the profile has it; HookFailed when it fails."""
        if name not in self.specs or self.channel is None:
            return None
        command, timeout = self.specs[name]
        out = self.channel.run(command, timeout=timeout)
        rec = HookRecord(
            name,
            command,
            out.returncode,
            out.stdout[-MAX_KEPT:],
            out.stderr[-MAX_KEPT:],
            round(out.seconds, 6),
            out.timed_out,
            trial,
        )
        self.records.append(rec)
        if not rec.ok:
            raise HookFailed(rec, self.channel.source)
        return rec

    def counts(self) -> dict[str, int]:
        """Runs per hook name (every name the profile has, 0 when it never ran)."""
        c = {name: 0 for name in self.specs}
        for r in self.records:
            c[r.hook] = c.get(r.hook, 0) + 1
        return c

    def to_doc(self) -> list[dict]:
        return [r.to_dict() for r in self.records]


def profile_hooks(profile: Any, netns: str | None = None, ssh: str | None = None) -> Hooks:
    """The hooks of a validated profile, over its DUT channel (options override it)."""
    dut = getattr(profile, "dut", None)
    hooks = getattr(dut, "hooks", None) if dut is not None else None
    channel = DutChannel.of(
        *pick_dut(netns, ssh, dut.netns if dut else None, dut.ssh if dut else None)
    )
    return Hooks.of(hooks, channel)


__all__ = ["HOOK_NAMES", "HookFailed", "HookRecord", "Hooks", "profile_hooks"]

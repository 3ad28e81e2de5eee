#!/usr/bin/env bash
# bootstrap.sh: set up tgen-tui on a fresh Debian machine (as root) and run the demo or the tests.
#
#   bash bootstrap.sh demo   # install, bring the lab up, open the console on profiles/lab.yaml
#   bash bootstrap.sh test   # install, then ruff, lint-imports, mypy and the full pytest suite (CI)
#
# It installs the apt packages the lab and the tests need (iproute2, nftables, conntrack,
# tshark, tcpdump for the kernel-stamp test, netsniff-ng for the trafgen comparison, openssh
# for the DUT channel's ssh test (an sshd it starts inside a lab namespace), tmux, chromium
# for the `tgen serve` browser test, driven by Playwright at /usr/bin/chromium: no browser
# download; clang, llvm, libbpf and bpftool for the XDP live-frames sender, tx_path: xdp,
# whose program it compiles), creates .venv next to this file
# and installs the package with its test extras. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")"
MODE="${1:-test}"
export DEBIAN_FRONTEND=noninteractive

need_apt=0
for bin in ip nft conntrack tshark tcpdump trafgen tmux tc chromium ssh sshd clang llc bpftool; do
    command -v "$bin" >/dev/null 2>&1 || need_apt=1
done
if [ "$need_apt" = 1 ]; then
    apt-get update -q
    apt-get install -y -q --no-install-recommends \
        iproute2 nftables conntrack tshark tcpdump netsniff-ng tmux procps python3-venv python3-pip \
        openssh-client openssh-server \
        chromium fonts-dejavu-core \
        clang llvm libbpf-dev bpftool libc6-dev
    # the ssh test starts its own sshd inside a lab namespace: no host sshd on port 22
    if command -v systemctl >/dev/null 2>&1; then
        systemctl disable --now ssh.service ssh.socket >/dev/null 2>&1 || true
    fi
fi

PY="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
    "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip >/dev/null 2>&1 || true
.venv/bin/python -m pip install -q -e '.[test]'
# an editable install leaves tgen_tui uncompiled and PYTHONDONTWRITEBYTECODE (set on some
# hosts) stops Python caching it: compile it once, so every tgen command and worker process
# starts from bytecode (tgen --help 0.47 -> 0.34 s on the 2-core test host)
.venv/bin/python -m compileall -q tgen_tui >/dev/null
# tx_path: xdp: compile its BPF program (tgen_tui/worker/bpf/xdp_live.c -> .o) with clang
.venv/bin/python -m tgen_tui.worker.xdplive build >/dev/null
# pacing: timer: its per-frame loop in C (tgen_tui/worker/csrc/pace.c -> .so); without a
# compiler the pacer keeps its Python loop (gaps under ~20 us come out longer)
.venv/bin/python -m tgen_tui.worker.cpace build >/dev/null || true

case "$MODE" in
    demo)
        .venv/bin/tgen lab up
        if [ -t 0 ] && [ -t 1 ]; then
            # the console: every port idle; 0 s starts p0, S/T all, ? every key, q quits
            exec .venv/bin/tgen tui profiles/lab.yaml
        fi
        # no terminal (a script, CI): the same profile headless for 10 s
        exec .venv/bin/tgen run profiles/lab.yaml --duration 10
        ;;
    test)
        .venv/bin/python -m pip install -q -e '.[test,cluster]'  # the cluster tests use Ray
        .venv/bin/ruff check .
        .venv/bin/lint-imports  # the DESIGN.md layers ([tool.importlinter] in pyproject.toml)
        .venv/bin/mypy  # engine/, worker/protocol.py, ui/ ([tool.mypy] in pyproject.toml)
        set +e
        # pytest keeps its assertion-rewritten test modules as bytecode unless
        # PYTHONDONTWRITEBYTECODE is set: let it (collection 3.0 -> 1.1 s on a second run)
        PYTHONDONTWRITEBYTECODE= .venv/bin/python -m pytest -q -p no:cacheprovider "${@:2}"
        rc=$?
        set -e
        # pytest exit 5 = no tests collected: that is a failure for CI, not a pass
        exit "$rc"
        ;;
    *)
        echo "usage: bash bootstrap.sh demo|test" >&2
        exit 2
        ;;
esac

#!/bin/bash
# Writes the results-store fixture with tgen-tui at main 468ed7a (see tests/results/data/README.md)
set -x
T="env PYTHONPATH=/work/wt/results /work/wt/results/.venv/bin/tgen"
DB=/tmp/hres/store.db
rm -f $DB $DB-wal $DB-shm
C="--db $DB --dut natbox"
$T lab set --prefix hres --rate-limit 0 >/dev/null
$T run /tmp/hres/lab.yaml -d 2 -q $C --build b1 --json /tmp/hres/run1.json
$T run /tmp/hres/lab.yaml -d 2 -q $C --build b2 --json /tmp/hres/run2.json
$T lab set --prefix hres --rate-limit 5000 >/dev/null
Q="--quick --max-rate 20000 --error 1000 --settle 100ms --timeout 200ms --no-plot $C --build b1"
$T rfc2544 throughput /tmp/hres/lab.yaml $Q --repeats 3 --json /tmp/hres/tp.json --md /tmp/hres/tp.md
$T rfc2544 loss /tmp/hres/lab.yaml $Q --max-rate 10000 --step 10 --duration 1s --json /tmp/hres/loss.json --md /tmp/hres/loss.md
$T rfc2544 latency /tmp/hres/lab.yaml $Q --rate 3000 --repeats 2 --json /tmp/hres/lat.json --md /tmp/hres/lat.md
$T rfc2544 pdv /tmp/hres/lab.yaml $Q --rate 3000 --repeats 2 --json /tmp/hres/pdv.json --md /tmp/hres/pdv.md
$T lab set --prefix hres --rate-limit 0 --ct-limit 6000 >/dev/null
S="--quick --settle 100ms --no-plot $C --build b1"
$T rfc9693 cps /tmp/hres/stateful.yaml $S -N 2000 --max-rate 100k --error 10000 --repeats 2 --json /tmp/hres/cps.json --md /tmp/hres/cps.md
$T rfc9693 capacity /tmp/hres/stateful.yaml $S --c0 2000 -E 1000 --max-rate 100k --error 20000 --json /tmp/hres/cap.json --md /tmp/hres/cap.md
$T rfc9693 teardown /tmp/hres/stateful.yaml $S -N 2000 --rate 20k --repeats 2 --json /tmp/hres/td.json --md /tmp/hres/td.md
$T lab set --prefix hres --ct-limit 0 >/dev/null
echo done

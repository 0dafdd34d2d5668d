#!/bin/bash
D=${LOOP_DIR:-/tmp/loop/run}
# loop-pipeline.ts first (it stops its clickhouse-server and ingester), while NATS is still up.
[ -f $D/pipeline.pid ] && kill -TERM $(cat $D/pipeline.pid) 2>/dev/null
for p in gw-b gw-a gw-off proxy reader mock nats; do [ -f $D/$p.pid ] && kill -TERM $(cat $D/$p.pid) 2>/dev/null; done
for i in $(seq 1 40); do a=0; for p in pipeline gw-b gw-a gw-off proxy reader mock nats; do [ -f $D/$p.pid ] && kill -0 $(cat $D/$p.pid) 2>/dev/null && a=1; done; [ $a = 0 ] && break; sleep 0.5; done; true

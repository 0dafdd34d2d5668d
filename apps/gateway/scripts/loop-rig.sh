#!/bin/bash
# Issue 15 rig: nats-server, the mock (SSE knobs of the bench), a gateway from BEFORE_TREE (capture on),
# this tree's gateway (capture on) and (capture off), on free loopback ports listed in $LOOP_DIR/ports.
# GWFLAGS_B / GWFLAGS_A / GWFLAGS_OFF / GWFLAGS_PROXY add node flags (e.g. --cpu-prof). BEFORE_TREE=none: no "before"
# gateway. A bare Node hop (bench/src/peers/node-proxy.ts, or PROXY_SRC under bench/src/peers) is started too;
# READER=1 adds node-proxy --read-body (reads and parses the body before forwarding: the floor of a routing hop) as READER.
# CONFIG_A: a configuration file (SIGHTLINE_CONFIG) for this tree's capture-on gateway, e.g. other batch bounds.
# ENV_A / ENV_B: extra NAME=value settings for this tree's / the before tree's capture-on gateway (e.g. SIGHTLINE_CONTENT_THREAD=0).
# COMPILED=1: this tree's gateways run from apps/gateway/dist (tsc -b first) with --conditions=production, as the
# Docker image runs them: real line numbers in profiles, no tsx.
# loop-stop.sh stops them by pid. loop-pipeline.ts adds clickhouse-server and the ingester (pid in $LOOP_DIR/pipeline.pid).
set -e
GW_MAIN="--import tsx apps/gateway/src/main.ts"; [ "${COMPILED:-}" = 1 ] && GW_MAIN="--conditions=production apps/gateway/dist/main.js"
D=${LOOP_DIR:-/tmp/loop/run}
# A rig still running in $D is stopped first: its pid files are about to be removed.
[ -d "$D" ] && LOOP_DIR=$D bash "$(dirname "$0")/loop-stop.sh" 2>/dev/null
rm -rf $D; mkdir -p $D/js $D/spool-b $D/spool-a $D/spool-off
free() { node -e 'const s=require("net").createServer();s.listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'; }
NP=$(free); MP=$(free); PB=$(free); PA=$(free); POFF=$(free); PP=$(free); PR=$(free)
nats-server -a 127.0.0.1 -p $NP -js -sd $D/js > $D/nats.log 2>&1 & echo $! > $D/nats.pid
cd "$(dirname "$0")/../../.."
node --import tsx bench/mock/main.ts --port $MP --ttft-ms 5 --gap-ms 2 --chunks 20 --response-bytes 400 > $D/mock.log 2>&1 & echo $! > $D/mock.pid
sleep 2
export OPENAI_BASE_URL=http://127.0.0.1:$MP/v1 ANTHROPIC_BASE_URL=http://127.0.0.1:$MP NATS_URL=nats://127.0.0.1:$NP SIGHTLINE_MODELS_REFRESH_MS=0
if [ "${BEFORE_TREE:?a checkout of the code to compare with, or none}" != none ]; then
  (cd "$BEFORE_TREE" && GATEWAY_PORT=$PB SIGHTLINE_SPOOL_DIR=$D/spool-b exec env ${ENV_B:-} node $GWFLAGS_B --import tsx apps/gateway/src/main.ts > $D/gw-b.log 2>&1) & echo $! > $D/gw-b.pid
else PB=$PA; fi
node $GWFLAGS_PROXY --import tsx bench/src/peers/${PROXY_SRC:-node-proxy.ts} --port $PP --upstream http://127.0.0.1:$MP > $D/proxy.log 2>&1 & echo $! > $D/proxy.pid
if [ "${READER:-}" = 1 ]; then
  node $GWFLAGS_PROXY --import tsx bench/src/peers/node-proxy.ts --read-body --port $PR --upstream http://127.0.0.1:$MP > $D/reader.log 2>&1 & echo $! > $D/reader.pid
fi
GATEWAY_PORT=$PA SIGHTLINE_SPOOL_DIR=$D/spool-a SIGHTLINE_CONFIG=${CONFIG_A:-} env ${ENV_A:-} node $GWFLAGS_A $GW_MAIN > $D/gw-a.log 2>&1 & echo $! > $D/gw-a.pid
GATEWAY_PORT=$POFF SIGHTLINE_SPOOL_DIR=$D/spool-off SIGHTLINE_BENCH_CAPTURE_OFF=1 node $GWFLAGS_OFF $GW_MAIN > $D/gw-off.log 2>&1 & echo $! > $D/gw-off.pid
if [ "$BEFORE_TREE" != none ]; then echo "MOCK=$MP BEFORE=$PB AFTER=$PA OFF=$POFF PROXY=$PP NATS=$NP" > $D/ports
else echo "MOCK=$MP ON=$PA OFF=$POFF PROXY=$PP NATS=$NP" > $D/ports; fi
[ "${READER:-}" = 1 ] && sed -i "s/\$/ READER=$PR/" $D/ports
for i in $(seq 1 60); do curl -s -o /dev/null http://127.0.0.1:$PB/healthz && curl -s -o /dev/null http://127.0.0.1:$PA/healthz && curl -s -o /dev/null http://127.0.0.1:$POFF/healthz && grep -q listening $D/proxy.log && { [ "${READER:-}" != 1 ] || grep -q listening $D/reader.log; } && break; sleep 0.5; done
cat $D/ports

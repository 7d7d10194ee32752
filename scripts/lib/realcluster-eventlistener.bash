# Sourced by scripts/realcluster (through realcluster-tekton.bash): an EventListener's sink as a local
# process, in the Tekton Triggers controller's place. On a cluster the Triggers controller turns every
# EventListener into a Deployment (one pod running the `eventlistenersink` image as the
# EventListener's ServiceAccount) and a Service, and writes the Service's URL to the EventListener's
# status.address. Without a kubelet no pod would ever run, so `eventlistener-launcher` (started by
# `up --tekton`) does the part the sink needs: for every EventListener it starts the sink with the
# args and env the controller's Deployment would give it, as the EventListener's ServiceAccount (a
# TokenRequest token, as the kubelet would mount), on a free loopback port, and writes
# http://127.0.0.1:PORT to status.address.url and Ready to its conditions; when the EventListener
# goes, so does its sink. It reads EventListeners and writes their status as the Triggers controller
# (ServiceAccount tekton-triggers-controller, the release's RBAC); only the token is asked for as admin,
# the kubelet's part.

# Started by `up --tekton`: the launcher as a component of its own.
start_eventlistener_launcher() {
  local T="$1"
  sa_kubeconfig "$TEKTON_NS" tekton-triggers-controller >/dev/null || tekton_fail "no token for tekton-triggers-controller"
  # The Triggers controller's Deployment as released (config/controller.yaml): its -el-* flags and
  # env are what it puts into every EventListener's pod.
  release_container "$T/config/controller.yaml" tekton-triggers-controller args >"$TK_DIR/triggers-controller.args"
  release_container "$T/config/controller.yaml" tekton-triggers-controller env >"$TK_DIR/triggers-controller.env"
  start_component eventlistener-launcher "$here/scripts/realcluster" eventlistener-launcher "$TK_DIR"
  wait_for eventlistener-launcher 30 test -f "$TK_DIR/eventlistener-launcher.ready"
}

# The sink's args and env for an EventListener (its JSON on stdin), one a line: `arg ...` and
# `env NAME=VALUE`, then `sa NAME`. As the Triggers controller builds them
# (pkg/reconciler/eventlistener/resources/{container,deployment}.go): the -el-* timeouts of its own
# flags, --is-multi-ns when a namespace selector names namespaces, --payload-validation from the
# annotation, --cloudevent-uri; env NAMESPACE, NAME, EL_EVENT (its -el-events), K_SINK_TIMEOUT (its
# -el-timeouthandler), SYSTEM_NAMESPACE (the pod's namespace), KUBERNETES_MIN_VERSION, the logging
# config (K_LOGGING_CONFIG, from ConfigMap config-logging-triggers, read as the controller reads it),
# then the env of the EventListener's own kubernetesResource container, which can override them.
# METRICS_PROMETHEUS_PORT is a free port instead of the controller's 9000; K_OBSERVABILITY_CONFIG is
# left out (the adapter's default: no metrics exporter).
sink_spec() {
  python3 -c '
import json, sys
el, args_file, env_file, logging_json, metrics_port, port = sys.argv[1:7]
el = json.loads(el)
ctl_args = open(args_file).read().split("\n")
ctl_env = dict(l.split("=", 1) for l in open(env_file).read().split("\n") if "=" in l)
flags = {}
for i, a in enumerate(ctl_args):
    if a.startswith("-el-") and i + 1 < len(ctl_args):
        flags[a[4:]] = ctl_args[i + 1]
meta, spec = el["metadata"], el.get("spec", {})
multi = bool(spec.get("namespaceSelector", {}).get("matchNames")) or any(
    g.get("triggerSelector", {}).get("namespaceSelector", {}).get("matchNames") for g in spec.get("triggerGroups", []))
validation = meta.get("annotations", {}).get("tekton.dev/payload-validation") != "false"
print("arg --el-name=" + meta["name"])
print("arg --el-namespace=" + meta["namespace"])
print("arg --port=" + port)
for f in ["readtimeout", "writetimeout", "idletimeout", "timeouthandler", "httpclient-readtimeout",
          "httpclient-keep-alive", "httpclient-tlshandshaketimeout", "httpclient-responseheadertimeout",
          "httpclient-expectcontinuetimeout"]:
    print("arg --%s=%s" % (f, flags[f]))
print("arg --is-multi-ns=" + str(multi).lower())
print("arg --payload-validation=" + str(validation).lower())
print("arg --cloudevent-uri=" + spec.get("cloudEventURI", ""))
env = [("K_LOGGING_CONFIG", logging_json), ("NAMESPACE", meta["namespace"]), ("NAME", meta["name"]),
       ("EL_EVENT", flags["events"]), ("K_SINK_TIMEOUT", flags["timeouthandler"]),
       ("SYSTEM_NAMESPACE", meta["namespace"]), ("METRICS_PROMETHEUS_PORT", metrics_port),
       ("KUBERNETES_MIN_VERSION", ctl_env.get("KUBERNETES_MIN_VERSION", ""))]
containers = (spec.get("resources", {}).get("kubernetesResource", {}).get("spec", {})
              .get("template", {}).get("spec", {}).get("containers", []))
for e in (containers[0].get("env", []) if containers else []):
    if "value" in e:
        env.append((e["name"], e["value"]))
for name, value in env:
    print("env %s=%s" % (name, value.replace("\n", " ")))
print("sa " + (spec.get("serviceAccountName") or "default"))
' "$@"
}

# The logging config the Triggers controller hands its sinks: config-logging-triggers' zap config.
sink_logging_config() {
  tk get configmap -n "$TEKTON_NS" config-logging-triggers -o json \
    | python3 -c 'import json, sys; d = json.load(sys.stdin).get("data", {}); print(json.dumps({"zap-logger-config": d.get("zap-logger-config", "")}) if d.get("zap-logger-config") else "")'
}

# Writes an EventListener's status as the Triggers controller would: its address and Ready.
eventlistener_status() {
  local ns="$1" name="$2" url="$3" ready="$4" reason="$5" message="$6" now patch
  now="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  patch="$(python3 -c 'import json, sys
ns, name, url, ready, reason, message, now = sys.argv[1:]
cond = {"type": "Ready", "status": ready, "lastTransitionTime": now}
if reason: cond.update(reason=reason, message=message)
status = {"conditions": [cond], "configuration": {"generatedName": "el-" + name}}
if url: status["address"] = {"url": url}
print(json.dumps({"status": status}))' "$ns" "$name" "$url" "$ready" "$reason" "$message" "$now")"
  KUBECONFIG="$TK_DIR/identities/$TEKTON_NS.tekton-triggers-controller.kubeconfig" \
    kubectl patch eventlisteners.triggers.tekton.dev -n "$ns" "$name" --subresource=status --type=merge -p "$patch" >/dev/null
}

# Starts the sink of one EventListener; prints its PID. Fails with 1 (to be tried again) when its
# ServiceAccount has no token yet, with 2 when the sink did not come up; either way the reason is in
# the EventListener's status.
start_sink() {
  local ns="$1" name="$2" el spec sa kc port metrics args=() env=() kind value
  el="$(KUBECONFIG="$TK_DIR/identities/$TEKTON_NS.tekton-triggers-controller.kubeconfig" \
    kubectl get eventlisteners.triggers.tekton.dev -n "$ns" "$name" -o json)" || return 1
  port="$(free_port)"; metrics="$(free_port)"
  spec="$(sink_spec "$el" "$TK_DIR/triggers-controller.args" "$TK_DIR/triggers-controller.env" \
    "$(sink_logging_config)" "$metrics" "$port")" || return 1
  while read -r kind value; do
    case "$kind" in arg) args+=("$value") ;; env) env+=("$value") ;; sa) sa="$value" ;; esac
  done <<<"$spec"
  if ! kc="$(sa_kubeconfig "$ns" "$sa" 2>/dev/null)"; then
    eventlistener_status "$ns" "$name" "" False ServiceAccountMissing \
      "no token for ServiceAccount $ns/$sa (the sink runs as it)" || true
    return 1
  fi
  local logname="eventlistener-$ns-$name"
  setsid env "${env[@]}" tekton-triggers-eventlistenersink "${args[@]}" --kubeconfig="$kc" \
    </dev/null >"$TK_DIR/logs/$logname.log" 2>&1 &
  local pid=$! start=$SECONDS
  echo "eventlistener/$ns/$name $pid" >>"$TK_DIR/pids"
  until curl -sf "http://127.0.0.1:$port/live" >/dev/null 2>&1; do
    if ! kill -0 "$pid" 2>/dev/null || [ $((SECONDS - start)) -gt 90 ]; then
      kill -- "-$pid" 2>/dev/null || true
      sed -i "\\|^eventlistener/$ns/$name $pid\$|d" "$TK_DIR/pids"
      eventlistener_status "$ns" "$name" "" False SinkNotReady "the sink did not come up: see $TK_DIR/logs/$logname.log" || true
      return 2
    fi
    sleep 0.3
  done
  eventlistener_status "$ns" "$name" "http://127.0.0.1:$port" True "" "" || true
  # Its Service's name (el-<name>.<ns>.svc, port 8080) for the network proxy of `up --knative`.
  [ ! -f "$TK_DIR/net/routes" ] || echo "el-$name.$ns.svc:8080 tcp:127.0.0.1:$port" >>"$TK_DIR/net/routes"
  log "EventListener $ns/$name: sink on http://127.0.0.1:$port as $ns/$sa (pid $pid), log $TK_DIR/logs/$logname.log"
  echo "$pid"
}

# `scripts/realcluster eventlistener-launcher DIR`: the loop `up --tekton` starts. It polls the
# EventListeners every second (a watch would be quicker to react; a second is well inside what the
# tests wait for an address, and a poll cannot silently stall).
eventlistener_launcher() {
  TK_DIR="$1"
  PATH="$(bin_for kubectl tekton-triggers-eventlistenersink):$PATH"
  export PATH
  local -A sinks=() failed=()
  local kc="$TK_DIR/identities/$TEKTON_NS.tekton-triggers-controller.kubeconfig" current uid ns name pid
  touch "$TK_DIR/eventlistener-launcher.ready"
  while :; do
    if current="$(KUBECONFIG="$kc" kubectl get eventlisteners.triggers.tekton.dev -A \
      -o 'jsonpath={range .items[*]}{.metadata.uid} {.metadata.namespace} {.metadata.name}{"\n"}{end}' 2>&1)"; then
      while read -r uid ns name; do
        [ -n "$uid" ] && [ -z "${sinks[$uid]:-}" ] && [ -z "${failed[$uid]:-}" ] || continue
        local rc=0
        pid="$(start_sink "$ns" "$name")" || rc=$?
        case "$rc" in
          0) sinks[$uid]="$ns $name $pid" ;;
          # Started but never ready: its status says why; not retried (as a crash-looping pod is not
          # fixed by waiting).
          2) failed[$uid]=1 ;;
        esac
      done <<<"$current"
      for uid in "${!sinks[@]}"; do
        grep -q "^$uid " <<<"$current" && continue
        read -r ns name pid <<<"${sinks[$uid]}"
        kill -- "-$pid" 2>/dev/null || true
        sed -i "\\|^eventlistener/$ns/$name $pid\$|d" "$TK_DIR/pids"
        unset "sinks[$uid]"
        log "EventListener $ns/$name is gone: its sink (pid $pid) stopped"
      done
    else
      log "listing EventListeners failed: $current"
    fi
    sleep 1
  done
}

# Sourced by scripts/realcluster: `up --tekton --knative` adds Knative Eventing's in-memory-channel
# Broker (knative.dev/eventing, realcluster/knative) beside Tekton, for the route
#   imagegate source -> Broker (ingress) -> InMemoryChannel (dispatcher) -> Trigger (filter) -> EventListener
# The release's namespace, ServiceAccounts, RBAC, ConfigMaps and CRDs are applied from the pinned
# module in Go's module cache; its six programs run as local processes, each as its ServiceAccount
# (a TokenRequest token), with its released Deployment's env, each in a network namespace of its
# own (`unshare --user --map-root-user --net --uts`, no root): their fixed ports (8080 for probes and the
# channel, 8443, 9090) then collide with nothing. scripts/lib/realcluster-net.py bridges the
# namespaces: a host proxy that routes the cluster-local Service names of the data plane to the
# programs and the EventListener sinks (HTTP_PROXY), and unix sockets to the API server.
# What kubelet, kube-controller-manager and Knative's webhook would write is written here (see
# knative_ready_objects and knative_aggregate_roles); docs/testing.md says why each.

# The programs the route needs, and the name each runs under (its release Deployment).
knative_route_components() {
  echo knative-eventing-controller knative-mt-broker-controller knative-imc-controller \
    knative-imc-dispatcher knative-mt-broker-ingress knative-mt-broker-filter
}
KN_NS=knative-eventing

# The host side of the network: the proxy and its sockets, in DIR/net; its log in logs/network.jsonl.
start_network_proxy() {
  local port api
  # Once per cluster: Tekton Chains (up --tekton) runs as a pod too.
  port="$(env_of "$TK_DIR" NET_PROXY_PORT)"
  if [ -n "$port" ] && [ -S "$TK_DIR/net/host-$port.sock" ]; then return 0; fi
  port="$(free_port)"; api="$(env_of "$TK_DIR" APISERVER_PORT)"
  mkdir -p "$TK_DIR/net/pods"
  touch "$TK_DIR/net/routes"
  set_env "$TK_DIR" NET_PROXY_PORT "$port"
  start_component network-proxy python3 "$here/scripts/lib/realcluster-net.py" proxy --dir "$TK_DIR/net" \
    --port "$port" --routes "$TK_DIR/net/routes" --log "$TK_DIR/logs/network.jsonl" \
    --host-port "$api" --host-port "$port"
  wait_for network-proxy 30 test -S "$TK_DIR/net/host-$port.sock"
}

# Adds a route to the proxy: requests for HOST (cluster-local name without `.cluster.local`,
# `:PORT` unless 80; a shell pattern) go to TARGET (unix:PATH or tcp:HOST:PORT).
add_route() { echo "$1 $2" >>"$TK_DIR/net/routes"; }

# The objects of a release file of the given kinds, as one JSON list for `kubectl apply -f -`.
release_objects() {
  local file="$1"; shift
  tk create --dry-run=client -o json -f "$file" | python3 -c '
import json, sys
text, kinds, items, at = sys.stdin.read(), sys.argv[1:], [], 0
while text[at:].strip():
    doc, end = json.JSONDecoder().raw_decode(text, at + len(text[at:]) - len(text[at:].lstrip()))
    items += [i for i in doc.get("items", [doc]) if i["kind"] in kinds]
    at = end
print(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
' "$@"
}

install_knative() {
  local E="$1" C="$1/config/channels/in-memory-channel" B="$1/config/brokers/mt-channel-broker" f
  tk apply --server-side -f "$E/config/core/100-namespace.yaml" >/dev/null
  # Every CRD of core (with fewer, the controllers wait forever for informers of kinds they do not
  # find) and the InMemoryChannel's. None of the route's kinds names a conversion webhook.
  tk apply --server-side -f "$E/config/core/resources/" -f "$C/resources/" >/dev/null
  for f in "$E"/config/core/200-*.yaml "$C"/200-*.yaml; do tk apply --server-side -f "$f" >/dev/null; done
  tk apply --server-side -f "$E/config/core/roles/" -f "$C/roles/" -f "$B/roles/" >/dev/null
  tk apply --server-side -f "$E/config/core/configmaps/" -f "$C/configmaps/" >/dev/null
  # The Secret the in-memory-channel controller's webhook keeps its certificate in. The webhook
  # configurations are not applied: nothing could reach the webhook, and the API server would
  # refuse every object they name.
  tk apply --server-side -f "$C/webhooks/secret.yaml" >/dev/null
  # The Services the reconcilers look for, and the dispatcher's Deployment (the in-memory-channel
  # reconciler reads its status).
  tk apply --server-side -f "$C/deployments/dispatcher-service.yaml" -f "$C/deployments/dispatcher.yaml" >/dev/null
  for f in broker-ingress broker-filter; do
    release_objects "$B/deployments/$f.yaml" Service | tk apply --server-side -f - >/dev/null
  done
  tk wait --for=condition=Established --timeout=60s crd --all >/dev/null
}

# kube-controller-manager's clusterrole-aggregation controller, once: every ClusterRole with an
# aggregationRule gets the union of the rules of the ClusterRoles its selectors match (repeated
# until nothing changes, for roles that aggregate aggregated roles). Knative's addressable-resolver,
# channelable-manipulator, source-observer, podspecable-binding and crossnamespace roles are
# aggregated; without their rules the controllers cannot read what they resolve.
knative_aggregate_roles() {
  local name rules
  while read -r name rules; do
    [ -n "$name" ] || continue
    tk patch clusterrole "$name" --type=merge -p "{\"rules\": $rules}" >/dev/null
  done < <(tk get clusterroles -o json | python3 -c '
import json, sys
roles = {r["metadata"]["name"]: r for r in json.load(sys.stdin)["items"]}
def matches(sel, labels):
    if any(labels.get(k) != v for k, v in (sel.get("matchLabels") or {}).items()):
        return False
    for e in sel.get("matchExpressions") or []:
        k, op, vals = e["key"], e["operator"], e.get("values") or []
        if (op == "In" and labels.get(k) not in vals) or (op == "NotIn" and labels.get(k) in vals) \
                or (op == "Exists" and k not in labels) or (op == "DoesNotExist" and k in labels):
            return False
    return True
aggregated = {n: r["aggregationRule"].get("clusterRoleSelectors") or [] for n, r in roles.items() if r.get("aggregationRule")}
rules = {n: r.get("rules") or [] for n, r in roles.items()}
changed = set()
for _ in range(5):
    moved = False
    for name, sels in sorted(aggregated.items()):
        union = []
        for other in sorted(roles):
            labels = roles[other]["metadata"].get("labels") or {}
            if other != name and any(matches(s, labels) for s in sels):
                union += [r for r in rules[other] if r not in union]
        if union != rules[name]:
            rules[name], moved = union, True
            changed.add(name)
    if not moved:
        break
for name in sorted(changed):
    print(name, json.dumps(rules[name]))
')
}

# What kubelet and kube-controller-manager would write for the pods of the release's Deployments:
# the dispatcher Deployment Available (its reconciler propagates that to every InMemoryChannel)
# and, for the Services the reconcilers check, Endpoints with one ready address (an address a pod
# would have; nothing routes by it: the proxy routes by name).
knative_ready_objects() {
  local now
  now="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  tk patch deployment -n "$KN_NS" imc-dispatcher --subresource=status --type=merge -p "{\"status\": {
    \"observedGeneration\": 1, \"replicas\": 1, \"updatedReplicas\": 1, \"readyReplicas\": 1, \"availableReplicas\": 1,
    \"conditions\": [{\"type\": \"Available\", \"status\": \"True\", \"reason\": \"MinimumReplicasAvailable\",
      \"message\": \"the dispatcher runs as a local process (scripts/lib/realcluster-knative.bash)\",
      \"lastUpdateTime\": \"$now\", \"lastTransitionTime\": \"$now\"}]}}" >/dev/null
  local svc ip=1 port
  for svc in imc-dispatcher:http-dispatcher broker-ingress:http broker-filter:http; do
    port="${svc#*:}"; svc="${svc%%:*}"
    # (kube-apiserver warns that v1 Endpoints are deprecated; the reconcilers read them.)
    tk apply --server-side -f - 2> >(grep -v 'Endpoints is deprecated' >&2) >/dev/null <<YAML
apiVersion: v1
kind: Endpoints
metadata: {name: $svc, namespace: $KN_NS}
subsets:
- addresses: [{ip: 10.244.0.$ip}]
  ports: [{name: $port, port: 8080, protocol: TCP}]
YAML
    ip=$((ip + 1))
  done
}

# Env (NAME=VALUE lines from release_container) for a pod named POD: its namespace and name.
knative_env() {
  local pod="$1" line
  while IFS= read -r line; do
    case "$line" in
      *=@metadata.namespace) echo "${line%%=*}=$KN_NS" ;;
      *=@metadata.name) echo "${line%%=*}=$pod" ;;
      *=@*) die "release env $line: a field reference the script does not fill" ;;
      *) echo "$line" ;;
    esac
  done
}

# Starts one program as a pod: COMPONENT, its release file and Deployment, its ServiceAccount.
# Port 8080 of its namespace (probes; the data plane of ingress, filter and dispatcher) is served
# on DIR/net/pods/<deployment>-8080.sock.
start_knative_pod() {
  local component="$1" file="$2" deployment="$3" sa="$4" kc env=() line api proxy
  api="$(env_of "$TK_DIR" APISERVER_PORT)"; proxy="$(env_of "$TK_DIR" NET_PROXY_PORT)"
  kc="$(sa_kubeconfig "$KN_NS" "$sa")" || tekton_fail "no token for $KN_NS/$sa"
  while IFS= read -r line; do env+=("$line"); done < <(release_container "$file" "$deployment" env \
    | knative_env "$deployment-0")
  # The API server at the host's address (the pod forwards it); every other HTTP request through the
  # proxy, which knows the cluster's names.
  env+=("KUBECONFIG=$kc" "HTTP_PROXY=http://127.0.0.1:$proxy" "NO_PROXY=127.0.0.1,localhost")
  printf '%s\n' "${env[@]}" >"$TK_DIR/$component.env"
  start_component "$component" unshare --user --map-root-user --net --uts \
    python3 "$here/scripts/lib/realcluster-net.py" pod --dir "$TK_DIR/net" --name "$deployment" \
    --hostname "$deployment-0" \
    --host-port "$api" --host-port "$proxy" --expose 8080 -- \
    env "${env[@]}" "$(bin_for "$component")/$component"
}
# Whether some Lease in knative-eventing is held by the pod named POD.
knative_leading() {
  tk get leases -n "$KN_NS" -o 'jsonpath={range .items[*]}{.spec.holderIdentity}{"\n"}{end}' | grep -q "^$1_"
}
# Whether a pod's port 8080 answers PATH with a 2xx, asked as kubelet asks (knative's drainer
# answers only a kubelet probe itself; other requests go to the program's handler).
pod_answers() {
  curl -sf --max-time 2 -A kube-probe/1.35 --unix-socket "$TK_DIR/net/pods/$1-8080.sock" "http://localhost$2" >/dev/null
}

# Knative's `authentication-oidc` on, as a platform that wants every sender to a Broker to say who
# it is turns it on (config-features): a Broker then has an audience, its ingress answers 401 to a
# request without a token for it and 403 to one from a ServiceAccount no EventPolicy (or the default
# mode, allow-same-namespace) admits, and each hop of the data plane sends a token of its own.
# Every program verifies tokens against the API server's OIDC discovery; here that is the API
# server's own URL (its issuer, https://127.0.0.1:<port>: each program's network namespace forwards
# that port to the host), its CA given as a trust bundle, and the discovery documents readable
# without credentials (the RBAC a cluster admin grants for this: Knative's docs say so).
# The trust bundle and the RBAC go first; the flag is turned on once the programs run (their
# verifier builds its OIDC provider when the flag changes, and only once: turned on before they
# have read the trust bundle, the provider fails and stays nil).
knative_oidc_prepare() {
  tk create configmap -n "$KN_NS" realcluster-apiserver-ca --from-file=ca.crt="$TK_DIR/pki/ca.crt" >/dev/null \
    && tk label configmap -n "$KN_NS" realcluster-apiserver-ca networking.knative.dev/trust-bundle=true >/dev/null \
    && tk create clusterrolebinding realcluster-oidc-discovery \
      --clusterrole=system:service-account-issuer-discovery --group=system:unauthenticated >/dev/null
}
knative_oidc_enable() {
  local api log="$TK_DIR/logs/knative-mt-broker-ingress.log" before
  api="$(env_of "$TK_DIR" APISERVER_PORT)"
  before="$(wc -l <"$log")"
  tk patch configmap -n "$KN_NS" config-features --type merge \
    -p "{\"data\":{\"authentication-oidc\":\"enabled\",\"oidc-discovery-base-url\":\"https://127.0.0.1:$api\"}}" >/dev/null \
    || return 1
  # Each program's verifier reads the discovery documents when it sees the change: give the
  # ingress time to, then fail if it logged a failure since (it logs nothing when it succeeds;
  # its failures from before, with the flag off, are expected).
  sleep 3
  ! tail -n +"$((before + 1))" "$log" | grep -q "could not initialize provider"
}

# `up --knative` (after up_tekton, whose helpers it uses).
up_knative() {
  TK_DIR="$1"
  local c start=$SECONDS E
  for c in $(knative_route_components); do build_one "$c"; done
  E="$(manifests_dir knative-eventing)"
  install_knative "$E" || tekton_fail "applying Knative Eventing's release files failed"
  knative_aggregate_roles || tekton_fail "aggregating Knative's ClusterRoles failed"
  knative_ready_objects || tekton_fail "writing the dispatcher's status and the Endpoints failed"
  knative_oidc_prepare || tekton_fail "preparing Knative's authentication-oidc failed"
  command -v unshare >/dev/null || tekton_fail "unshare (util-linux) is needed: each Knative program runs in a network namespace"
  unshare --user --map-root-user --net --uts true 2>/dev/null \
    || tekton_fail "unshare --user --map-root-user --net --uts is refused here (unprivileged user namespaces disabled? sysctl kernel.unprivileged_userns_clone / user.max_user_namespaces)"
  start_network_proxy
  local C="$E/config/channels/in-memory-channel" B="$E/config/brokers/mt-channel-broker"
  # The data plane: every hop is a Service name (the channel's is an ExternalName Service to the
  # dispatcher's); the EventListener sinks add theirs (realcluster-eventlistener.bash).
  add_route "broker-ingress.$KN_NS.svc" "unix:$TK_DIR/net/pods/mt-broker-ingress-8080.sock"
  add_route "broker-filter.$KN_NS.svc" "unix:$TK_DIR/net/pods/mt-broker-filter-8080.sock"
  add_route "imc-dispatcher.$KN_NS.svc" "unix:$TK_DIR/net/pods/imc-dispatcher-8080.sock"
  add_route "*-kn-channel.*.svc" "unix:$TK_DIR/net/pods/imc-dispatcher-8080.sock"
  start_knative_pod knative-imc-dispatcher "$C/deployments/dispatcher.yaml" imc-dispatcher imc-dispatcher
  start_knative_pod knative-mt-broker-ingress "$B/deployments/broker-ingress.yaml" mt-broker-ingress mt-broker-ingress
  start_knative_pod knative-mt-broker-filter "$B/deployments/broker-filter.yaml" mt-broker-filter mt-broker-filter
  start_knative_pod knative-eventing-controller "$E/config/core/deployments/controller.yaml" eventing-controller eventing-controller
  start_knative_pod knative-mt-broker-controller "$B/deployments/controller.yaml" mt-broker-controller eventing-controller
  start_knative_pod knative-imc-controller "$C/deployments/controller.yaml" imc-controller imc-controller
  wait_for knative-imc-dispatcher 90 pod_answers imc-dispatcher /healthz
  wait_for knative-mt-broker-ingress 90 pod_answers mt-broker-ingress /healthz
  wait_for knative-mt-broker-filter 90 pod_answers mt-broker-filter /healthz
  wait_for knative-eventing-controller 90 pod_answers eventing-controller /readiness
  wait_for knative-mt-broker-controller 90 pod_answers mt-broker-controller /readiness
  # The in-memory-channel controller runs knative's webhook main, whose probes are the webhook's
  # (HTTPS, a certificate it makes first): it is ready once it leads its reconciler.
  wait_for knative-imc-controller 90 knative_leading imc-controller-0
  knative_oidc_enable || tekton_fail "turning Knative's authentication-oidc on failed" knative-mt-broker-ingress
  log "Knative Eventing $(component_version knative-eventing-controller) ready in $((SECONDS - start)) s" \
    "(authentication-oidc on; six programs, each in its own network namespace; proxy 127.0.0.1:$(env_of "$TK_DIR" NET_PROXY_PORT)," \
    "requests in $TK_DIR/logs/network.jsonl)"
}

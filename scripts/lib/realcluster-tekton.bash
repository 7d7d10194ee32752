# Sourced by scripts/realcluster: `up --tekton` runs, beside etcd and kube-apiserver, what a Tekton
# PipelineRun needs on a cluster without kubelet or container runtime, each as a local process with
# its own identity and the RBAC its release gives it:
#   kube-scheduler     binds pods to the one fake Node (user system:kube-scheduler, a client cert)
#   kwok               plays the Node's kubelet: Stages (API objects) move pods through their phases;
#                      realcluster/kwok/tekton-step-stage.yaml ends Tekton step pods as the test says
#   Tekton Pipelines   the controller (ServiceAccount tekton-pipelines-controller)
#   Tekton Triggers    the core interceptors (tekton-triggers-core-interceptors) and, for every
#                      EventListener, its sink (the EventListener's ServiceAccount), started by
#                      realcluster-eventlistener.bash in the Triggers controller's place
#   Tekton Chains      the controller (ServiceAccount tekton-chains-controller), signing every TaskRun
#                      with a key made here by cosign (its public half: DIR/chains/cosign.pub)
# The releases' own CRDs, RBAC and ConfigMaps are applied from the pinned modules in Go's module
# cache; every place a released file is adapted says why. See docs/testing.md.

. "$here/scripts/lib/realcluster-eventlistener.bash"

# The components `up --tekton` runs besides kube-apiserver and etcd (kube-scheduler is built with them).
tekton_components() {
  echo tekton-pipelines-controller tekton-triggers-eventlistenersink tekton-triggers-interceptors kwok \
    tekton-chains-controller cosign
}

# The namespace both releases install into.
TEKTON_NS=tekton-pipelines
# The core interceptors listen on this port: a constant in triggers' cmd/interceptors (HTTPSPort), so
# two `up --tekton` on one machine take turns (the lock is held as long as the interceptors run).
INTERCEPTORS_PORT=8443
INTERCEPTORS_LOCK=/tmp/imagegate-realcluster-interceptors-8443.lock

tk() { KUBECONFIG="$TK_DIR/admin.kubeconfig" kubectl "$@"; }

# Stops `up --tekton` with the last lines of the logs named, after stopping everything it started.
tekton_fail() {
  local msg="$1"; shift
  for name in "$@"; do
    [ -f "$TK_DIR/logs/$name.log" ] && { echo "--- $name.log" >&2; tail -n 25 "$TK_DIR/logs/$name.log" >&2; }
  done
  down "$TK_DIR" || true
  die "$msg"
}

# Runs a component in the background: its output to logs/NAME.log, its PID in `pids` for `down`.
# Started in its own process group, so that `down` can stop what it forks too.
start_component() {
  local name="$1"; shift
  setsid "$@" </dev/null >"$TK_DIR/logs/$name.log" 2>&1 &
  echo "$name $!" >>"$TK_DIR/pids"
}
pid_of() { awk -v n="$1" '$1 == n { p = $2 } END { print p }' "$TK_DIR/pids"; }

# Waits (at most SECONDS) until COMMAND succeeds, failing `up` if the component NAME exits first.
wait_for() {
  local name="$1" seconds="$2"; shift 2
  local start=$SECONDS pid
  pid="$(pid_of "$name")"
  until "$@" >/dev/null 2>&1; do
    kill -0 "$pid" 2>/dev/null || tekton_fail "$name exited (its log is above)" "$name"
    [ $((SECONDS - start)) -lt "$seconds" ] || tekton_fail "$name was not ready after $seconds s" "$name"
    sleep 0.3
  done
}

# A kubeconfig for a ServiceAccount, with a token from the TokenRequest API (as a pod's projected
# token; 48 hours, longer than any test run).
sa_kubeconfig() {
  local ns="$1" sa="$2" out token server
  out="$TK_DIR/identities/$ns.$sa.kubeconfig"
  mkdir -p "$TK_DIR/identities"
  token="$(tk create token -n "$ns" "$sa" --duration=48h)" || return 1
  server="$(tk config view --minify -o 'jsonpath={.clusters[0].cluster.server}')"
  KUBECONFIG="$out" kubectl config set-cluster realcluster --server="$server" \
    --certificate-authority="$TK_DIR/pki/ca.crt" --embed-certs >/dev/null
  KUBECONFIG="$out" kubectl config set-credentials "$sa" --token="$token" >/dev/null
  KUBECONFIG="$out" kubectl config set-context realcluster --cluster=realcluster --user="$sa" >/dev/null
  KUBECONFIG="$out" kubectl config use-context realcluster >/dev/null
  echo "$out"
}

# The env (NAME=VALUE, one a line) or args (one a line) of a container of a Deployment in a release
# file, as the release sets them; env taken from a field (`valueFrom`) comes out as NAME=@FIELDPATH.
release_container() {
  local file="$1" deployment="$2" what="$3"
  tk create --dry-run=client -o json -f "$file" | python3 -c '
import json, sys
# kubectl prints one JSON object per document of the file, one after the other.
text, name, what, items, at = sys.stdin.read(), sys.argv[1], sys.argv[2], [], 0
while text[at:].strip():
    doc, end = json.JSONDecoder().raw_decode(text, at + len(text[at:]) - len(text[at:].lstrip()))
    items += doc.get("items", [doc])
    at = end
dep = next(i for i in items if i["kind"] == "Deployment" and i["metadata"]["name"] == name)
c = dep["spec"]["template"]["spec"]["containers"][0]
if what == "args":
    for a in c.get("args", []):
        print(a)
else:
    for e in c.get("env", []):
        ref = e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
        print(e["name"] + "=" + ("@" + ref if ref else e.get("value", "")))
' "$deployment" "$what"
}

# Env from release_container as `env` arguments: a field reference to the pod's namespace becomes
# NAMESPACE (the pod would run there); variables named in DROP (space-separated) are left out.
env_args() {
  local namespace="$1" drop=" $2 " line
  while IFS= read -r line; do
    case "$drop" in *" ${line%%=*} "*) continue ;; esac
    case "$line" in
      *=@metadata.namespace) echo "${line%%=*}=$namespace" ;;
      *=@*) die "release env $line: a field reference other than metadata.namespace" ;;
      *) echo "$line" ;;
    esac
  done
}

install_tekton_pipelines() {
  local P="$1"
  tk apply --server-side -f "$P/config/100-namespace/100-namespace.yaml" >/dev/null
  # The CRDs as released: pipelines, pipelineruns, tasks, taskruns, resolutionrequests and stepactions
  # name the webhook for conversion, which is not run (admission and conversion are its only jobs;
  # the controller defaults and validates what it reconciles). The API server asks it only when a
  # client wants a version other than the stored one (v1, or v1beta1 for the last two), so a v1beta1
  # read of a PipelineRun fails here as it would with the webhook down.
  tk apply --server-side -f "$P/config/300-crds/" >/dev/null
  for f in 200-clusterrole 200-role 200-serviceaccount 201-clusterrolebinding 201-rolebinding; do
    tk apply --server-side -f "$P/config/$f.yaml" >/dev/null
  done
  # Every ConfigMap of the release (feature flags, defaults, ...): the controller's informers wait for
  # some of them.
  for f in "$P"/config/config-*.yaml; do tk apply --server-side -f "$f" >/dev/null; done
}

install_tekton_triggers() {
  local T="$1" f
  for f in "$T"/config/300-*.yaml "$T"/config/200-*.yaml "$T"/config/201-*.yaml "$T"/config/config-*.yaml \
    "$T/config/interceptors/00-interceptor-secrets.yaml" "$T/config/interceptors/core-interceptors.yaml"; do
    tk apply --server-side -f "$f" >/dev/null
  done
  tk wait --for=condition=Established --timeout=60s crd --all >/dev/null
}

install_kwok() {
  local K="$1"
  tk apply --server-side -f "$K/kustomize/crd/bases/kwok.x-k8s.io_stages.yaml" >/dev/null
  tk apply --server-side -k "$K/kustomize/rbac" >/dev/null
  tk wait --for=condition=Established --timeout=60s crd/stages.kwok.x-k8s.io >/dev/null
  # kwok's own Stages for a Node (Ready, with capacity) and for the start (Running) and deletion of a
  # pod; its stock completion Stage matches only Jobs' pods, so Tekton's own is imagegate's.
  tk apply --server-side -f "$K/kustomize/stage/node/fast/node-initialize.yaml" \
    -f "$K/kustomize/stage/pod/fast/pod-ready.yaml" -f "$K/kustomize/stage/pod/fast/pod-delete.yaml" \
    -f "$here/realcluster/kwok/tekton-step-stage.yaml" >/dev/null
  # One Node, without kwok's usual NoSchedule taint: Tekton's pods do not tolerate it.
  tk apply --server-side -f - >/dev/null <<'EOF'
apiVersion: v1
kind: Node
metadata:
  name: kwok-node-0
  annotations: {kwok.x-k8s.io/node: fake, node.alpha.kubernetes.io/ttl: "0"}
  labels: {type: kwok, kubernetes.io/hostname: kwok-node-0, kubernetes.io/os: linux, kubernetes.io/arch: amd64}
EOF
}

start_kube_scheduler() {
  local d="$TK_DIR/pki" port
  # The scheduler's usual identity, a client certificate for user system:kube-scheduler, which the
  # API server's bootstrap RBAC binds (ClusterRoles system:kube-scheduler, system:volume-scheduler).
  openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=system:kube-scheduler" \
    -keyout "$d/kube-scheduler.key" -out "$d/kube-scheduler.csr" 2>/dev/null
  printf 'extendedKeyUsage=clientAuth\n' >"$d/kube-scheduler.ext"
  openssl x509 -req -in "$d/kube-scheduler.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" -CAcreateserial -days 2 \
    -extfile "$d/kube-scheduler.ext" -out "$d/kube-scheduler.crt" 2>/dev/null
  local kc="$TK_DIR/identities/kube-scheduler.kubeconfig" server
  mkdir -p "$TK_DIR/identities"
  server="$(tk config view --minify -o 'jsonpath={.clusters[0].cluster.server}')"
  KUBECONFIG="$kc" kubectl config set-cluster realcluster --server="$server" --certificate-authority="$d/ca.crt" --embed-certs >/dev/null
  KUBECONFIG="$kc" kubectl config set-credentials kube-scheduler --client-certificate="$d/kube-scheduler.crt" \
    --client-key="$d/kube-scheduler.key" --embed-certs >/dev/null
  KUBECONFIG="$kc" kubectl config set-context realcluster --cluster=realcluster --user=kube-scheduler >/dev/null
  KUBECONFIG="$kc" kubectl config use-context realcluster >/dev/null
  port="$(free_port)"
  start_component kube-scheduler kube-scheduler --kubeconfig="$kc" --authentication-kubeconfig="$kc" \
    --authorization-kubeconfig="$kc" --leader-elect=false --bind-address=127.0.0.1 --secure-port="$port" \
    --cert-dir="$TK_DIR/kube-scheduler"
  wait_for kube-scheduler 60 curl -sfk "https://127.0.0.1:$port/readyz"
}

start_kwok() {
  local kc
  kc="$(sa_kubeconfig kube-system kwok-controller)" || tekton_fail "no token for kwok-controller"
  # Stages come from the API server (--enable-crds=Stage), so a test can add its own while it runs;
  # an empty --config keeps a ~/.kwok/kwok.yaml out.
  : >"$TK_DIR/kwok.yaml"
  start_component kwok kwok --kubeconfig="$kc" --config="$TK_DIR/kwok.yaml" --manage-all-nodes=true \
    --enable-crds=Stage --node-lease-duration-seconds=0
  wait_for kwok 60 node_ready kwok-node-0
  # The API server's admission (TaintNodesByCondition) taints a new Node not-ready; on a cluster
  # the node lifecycle controller of kube-controller-manager, which does not run here, lifts it once
  # the Node is Ready. Lifted here in its place.
  tk taint node kwok-node-0 node.kubernetes.io/not-ready:NoSchedule- >/dev/null 2>&1 || true
  [ -z "$(tk get node kwok-node-0 -o 'jsonpath={.spec.taints}')" ] || tekton_fail "kwok-node-0 is still tainted" kwok
}
node_ready() { [ "$(tk get node "$1" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}')" = True ]; }

start_tekton_controller() {
  local P="$1" kc env=() args=() line
  kc="$(sa_kubeconfig "$TEKTON_NS" tekton-pipelines-controller)" || tekton_fail "no token for tekton-pipelines-controller"
  # The env and args of the released Deployment (config/controller.yaml), with three changes: the
  # pod's namespace is tekton-pipelines; SSL_CERT_FILE is left out (it names a file of a ConfigMap
  # volume the pod would mount; Go then trusts the system's CAs, which the pod's SSL_CERT_DIR names
  # too); and the ports of the probes, profiling and metrics servers, which bind every address, are
  # free ones instead of 8080, 8008 and 9090. The image args stay as released (`ko://...`): kwok
  # never pulls an image.
  while IFS= read -r line; do env+=("$line"); done < <(release_container "$P/config/controller.yaml" \
    tekton-pipelines-controller env | env_args "$TEKTON_NS" SSL_CERT_FILE)
  while IFS= read -r line; do args+=("$line"); done < <(release_container "$P/config/controller.yaml" \
    tekton-pipelines-controller args)
  local probes
  probes="$(free_port)"
  env+=("PROBES_PORT=$probes" "PROFILING_PORT=$(free_port)" "METRICS_PROMETHEUS_PORT=$(free_port)")
  printf '%s\n' "${env[@]}" >"$TK_DIR/tekton-pipelines-controller.env"
  start_component tekton-pipelines-controller env "${env[@]}" tekton-pipelines-controller \
    "${args[@]}" --kubeconfig="$kc"
  # Ready once it leads its reconcilers (it runs as released, with leader election on Leases in
  # tekton-pipelines): the probe answers from the start, so the Leases decide.
  wait_for tekton-pipelines-controller 90 curl -sf "http://127.0.0.1:$probes/readiness"
  wait_for tekton-pipelines-controller 90 tekton_leading
}
# Every reconciler of the controller holds its Lease (one bucket each, as released).
tekton_leading() {
  local holders
  holders="$(tk get leases -n "$TEKTON_NS" -o 'jsonpath={range .items[*]}{.metadata.name} {.spec.holderIdentity}{"\n"}{end}')"
  for r in pipelinerun.reconciler taskrun.reconciler resolutionrequest.reconciler; do
    printf '%s\n' "$holders" | grep -q "^tekton-pipelines-controller\.github\.com\.tektoncd\.pipeline\.pkg\.reconciler\.$r\.00-of-01 ." || return 1
  done
}

start_tekton_interceptors() {
  local T="$1" kc env=() line ci path
  # The released ClusterInterceptors name the Service tekton-triggers-core-interceptors, which only
  # cluster DNS resolves; here each points at the local process instead (spec.clientConfig.url, which
  # the sink uses when no Triggers controller has written status.address).
  for ci in $(tk get clusterinterceptors -l server/type=https -o 'jsonpath={.items[*].metadata.name}'); do
    path="$(tk get clusterinterceptor "$ci" -o 'jsonpath={.spec.clientConfig.service.path}')"
    tk patch clusterinterceptor "$ci" --type=json -p "[{\"op\":\"remove\",\"path\":\"/spec/clientConfig/service\"},
      {\"op\":\"add\",\"path\":\"/spec/clientConfig/url\",\"value\":\"https://localhost:$INTERCEPTORS_PORT/$path\"}]" >/dev/null
  done
  kc="$(sa_kubeconfig "$TEKTON_NS" tekton-triggers-core-interceptors)" || tekton_fail "no token for the core interceptors"
  # The released Deployment's env (config/interceptors/core-interceptors-deployment.yaml), with
  # INTERCEPTOR_TLS_SVC_NAME=localhost instead of the Service's name: the interceptors make their
  # serving certificate for that name, and the sink reaches them as https://localhost:8443.
  while IFS= read -r line; do env+=("$line"); done < <(release_container \
    "$T/config/interceptors/core-interceptors-deployment.yaml" tekton-triggers-core-interceptors env \
    | env_args "$TEKTON_NS" INTERCEPTOR_TLS_SVC_NAME)
  env+=(INTERCEPTOR_TLS_SVC_NAME=localhost)
  local fd
  exec {fd}>"$INTERCEPTORS_LOCK"
  flock -w 300 "$fd" || tekton_fail "port $INTERCEPTORS_PORT stayed taken by another \`up --tekton\` for 300 s ($INTERCEPTORS_LOCK)"
  if curl -sk -o /dev/null "https://127.0.0.1:$INTERCEPTORS_PORT/"; then
    tekton_fail "port $INTERCEPTORS_PORT is in use: the core interceptors need it (a constant of theirs)"
  fi
  start_component tekton-triggers-interceptors env "${env[@]}" tekton-triggers-interceptors \
    $(release_container "$T/config/interceptors/core-interceptors-deployment.yaml" tekton-triggers-core-interceptors args) \
    --kubeconfig="$kc"
  exec {fd}>&-
  wait_for tekton-triggers-interceptors 60 interceptors_ready
}
# The interceptors answer over TLS, and every https ClusterInterceptor carries the CA of the
# certificate they made (the sink trusts nothing else, and waits for that before it serves). curl
# does not verify that certificate: knative's generator gives the CA and the serving certificate
# the same subject name, which OpenSSL takes for a self-signed certificate and refuses; Go's
# verifier, the sink's, builds the chain.
interceptors_ready() {
  local ca
  ca="$(tk get secret -n "$TEKTON_NS" tekton-triggers-core-interceptors-certs -o 'jsonpath={.data.ca-cert\.pem}')"
  [ -n "$ca" ] || return 1
  curl -sfk "https://localhost:$INTERCEPTORS_PORT/ready" >/dev/null || return 1
  ! tk get clusterinterceptors -l server/type=https -o 'jsonpath={range .items[*]}{.spec.clientConfig.caBundle}{"\n"}{end}' \
    | grep -qvx -- "$ca"
}

# Tekton Chains as released (config/ of its module: the namespace tekton-chains, its RBAC, its
# ConfigMaps, the empty signing-secrets Secret and chains-config), configured as the proof's docs say
# (docs/custom-task.md, "Tekton Chains' signed record"): TaskRuns in its in-toto format in its
# `tekton` storage (the TaskRun's annotations); no OCI storage (nothing here pushes images). The key
# is cosign's, made here, in signing-secrets as `cosign generate-key-pair k8s://` would put it.
install_tekton_chains() {
  local C="$1" d="$TK_DIR/chains"
  tk apply --server-side -f "$C/config/" >/dev/null || return 1
  mkdir -p "$d/signing-secrets"
  ( cd "$d/signing-secrets" && printf 'realcluster' >cosign.password \
      && COSIGN_PASSWORD=realcluster cosign generate-key-pair >/dev/null 2>&1 ) || return 1
  cp "$d/signing-secrets/cosign.pub" "$d/cosign.pub"
  tk create secret generic signing-secrets -n tekton-chains --dry-run=client -o yaml \
    --from-file="$d/signing-secrets/cosign.key" --from-file="$d/signing-secrets/cosign.pub" \
    --from-file="$d/signing-secrets/cosign.password" | tk apply --server-side --force-conflicts -f - >/dev/null || return 1
  tk apply --server-side --force-conflicts -f - >/dev/null <<'EOF'
apiVersion: v1
kind: ConfigMap
metadata: {name: chains-config, namespace: tekton-chains}
data:
  artifacts.taskrun.format: in-toto
  artifacts.taskrun.storage: tekton
  artifacts.pipelinerun.storage: tekton
  artifacts.oci.storage: ""
EOF
}

# Run as Knative's programs are (realcluster-knative.bash), as a pod in a network namespace of its
# own (`unshare --user --map-root-user --net --uts`, no root; realcluster-net.py forwards the API
# server's port into it): its probes listen on 8080, a constant of knative.dev/pkg's sharedmain that
# no env moves, which Tekton's controller holds on the host. And in a mount namespace of its own
# (`--mount`), because it reads its key from /etc/signing-secrets, a path in its code (the Secret's
# volume in the pod): there /etc is a tmpfs holding the host's entries (symlinks through a bind
# mount of the host's /etc) and signing-secrets, a bind mount of DIR/chains/signing-secrets; the
# host's /etc is not touched. Its env is the release's (config/100-deployment.yaml), the pod's
# namespace tekton-chains.
start_tekton_chains() {
  local C="$1" d="$TK_DIR/chains" kc env=() line api
  command -v unshare >/dev/null || tekton_fail "unshare (util-linux) is needed: Tekton Chains runs in namespaces of its own"
  unshare --user --map-root-user --net --uts --mount true 2>/dev/null \
    || tekton_fail "unshare --user --map-root-user --net --uts --mount is refused here (unprivileged user namespaces disabled? sysctl kernel.unprivileged_userns_clone / user.max_user_namespaces)"
  start_network_proxy
  api="$(env_of "$TK_DIR" APISERVER_PORT)"
  kc="$(sa_kubeconfig tekton-chains tekton-chains-controller)" || tekton_fail "no token for tekton-chains-controller"
  while IFS= read -r line; do env+=("$line"); done < <(release_container "$C/config/100-deployment.yaml" \
    tekton-chains-controller env | env_args tekton-chains "")
  mkdir -p "$d/host-etc"
  start_component tekton-chains-controller unshare --user --map-root-user --net --uts --mount \
    python3 "$here/scripts/lib/realcluster-net.py" pod --dir "$TK_DIR/net" --name tekton-chains-controller \
    --hostname tekton-chains-controller-0 --host-port "$api" --expose 8080 -- \
    env "${env[@]}" bash -c 'set -e; d="$1"; shift
      mount --bind /etc "$d/host-etc"
      mount -t tmpfs tmpfs /etc
      for e in "$d"/host-etc/* "$d"/host-etc/.[!.]*; do if [ -e "$e" ]; then ln -s "$e" "/etc/${e##*/}"; fi; done
      mkdir /etc/signing-secrets
      mount --bind "$d/signing-secrets" /etc/signing-secrets
      exec "$@"' chains "$d" "$(bin_for tekton-chains-controller)/tekton-chains-controller" --kubeconfig="$kc"
  wait_for tekton-chains-controller 90 curl -sf --max-time 2 \
    --unix-socket "$TK_DIR/net/pods/tekton-chains-controller-8080.sock" http://localhost/readiness
  wait_for tekton-chains-controller 90 chains_leading
}
# Its TaskRun reconciler holds its Lease (leader election as released, in tekton-chains; the
# component is called `watcher`).
chains_leading() {
  tk get leases -n tekton-chains -o 'jsonpath={range .items[*]}{.metadata.name} {.spec.holderIdentity}{"\n"}{end}' \
    | grep -q '^watcher\.github\.com\.tektoncd\.chains\.pkg\.reconciler\.taskrun\.reconciler\.00-of-01 .'
}

# imagegate's own interceptor (config/triggers/), which tekton/430's EventListener asks about every
# event: installed as a user installs it (config/'s namespace and ImagePromotion CRD, then
# `kubectl apply -k config/triggers/`), its ClusterInterceptor pointed at the local process
# (spec.clientConfig.url, as for the core interceptors above), and `imagegate interceptor` run as
# its ServiceAccount. It writes its CA into the caBundle itself; the EventListener sinks wait for
# that. Runs when IMAGEGATE_BIN names the imagegate binary (the tests and `demo` set it).
start_imagegate_interceptor() {
  [ -n "${IMAGEGATE_BIN:-}" ] || return 0
  [ -x "$IMAGEGATE_BIN" ] || tekton_fail "IMAGEGATE_BIN=$IMAGEGATE_BIN is not an executable"
  local port admin kc
  tk apply --server-side -f "$here/config/100-namespace.yaml" -f "$here/config/300-imagepromotion-crd.yaml" >/dev/null \
    && tk wait --for=condition=Established --timeout=60s crd/imagepromotions.imagegate.dev >/dev/null \
    && tk apply --server-side -k "$here/config/triggers/" >/dev/null \
    || tekton_fail "applying config/triggers/ failed"
  port="$(free_port)"; admin="$(free_port)"
  tk patch clusterinterceptor imagegate --type=json -p "[{\"op\":\"remove\",\"path\":\"/spec/clientConfig/service\"},
    {\"op\":\"add\",\"path\":\"/spec/clientConfig/url\",\"value\":\"https://localhost:$port/\"}]" >/dev/null \
    || tekton_fail "pointing ClusterInterceptor imagegate at this machine failed"
  kc="$(sa_kubeconfig imagegate-system imagegate-interceptor)" || tekton_fail "no token for imagegate-interceptor"
  start_component imagegate-interceptor env KUBECONFIG="$kc" POD_NAMESPACE=imagegate-system RUST_LOG=info \
    "$IMAGEGATE_BIN" --log-format json interceptor --addr "127.0.0.1:$port" --admin-addr "127.0.0.1:$admin" \
    --tls-name localhost
  set_env "$TK_DIR" IMAGEGATE_INTERCEPTOR_ADMIN_PORT "$admin"
  IMAGEGATE_INTERCEPTOR_ADMIN_PORT="$admin" wait_for imagegate-interceptor 60 imagegate_interceptor_ready
}
imagegate_interceptor_ready() {
  curl -sf "http://127.0.0.1:$IMAGEGATE_INTERCEPTOR_ADMIN_PORT/readyz" >/dev/null || return 1
  [ -n "$(tk get clusterinterceptor imagegate -o 'jsonpath={.spec.clientConfig.caBundle}')" ]
}

# `up --tekton`: after the control plane is up (admin kubeconfig in DIR).
up_tekton() {
  TK_DIR="$1"
  local c start=$SECONDS
  for c in kube-scheduler $(tekton_components); do build_one "$c"; done
  PATH="$(bin_for kubectl kube-scheduler $(tekton_components)):$PATH"
  export PATH
  local P T K
  P="$(manifests_dir tekton-pipeline)"; T="$(manifests_dir tekton-triggers)"; K="$(manifests_dir kwok)"
  local C
  C="$(manifests_dir tekton-chains)"
  : >>"$TK_DIR/pids"
  install_tekton_pipelines "$P" || tekton_fail "applying Tekton Pipelines' release files failed"
  install_tekton_triggers "$T" || tekton_fail "applying Tekton Triggers' release files failed"
  install_kwok "$K" || tekton_fail "applying kwok's release files failed"
  start_kube_scheduler
  start_kwok
  start_tekton_controller "$P"
  start_tekton_interceptors "$T"
  install_tekton_chains "$C" || tekton_fail "applying Tekton Chains' release files and its key failed"
  start_tekton_chains "$C"
  start_imagegate_interceptor
  start_eventlistener_launcher "$T"
  log "Tekton ready in $((SECONDS - start)) s: kube-scheduler $(component_version kube-scheduler)," \
    "kwok $(component_version kwok), Tekton Pipelines $(component_version tekton-pipelines-controller)," \
    "Tekton Triggers $(component_version tekton-triggers-interceptors)," \
    "Tekton Chains $(component_version tekton-chains-controller); logs in $TK_DIR/logs"
}

# Stops what `up --tekton` started, newest first (the EventListener launcher before the sinks it
# started), each with its process group.
down_tekton() {
  local dir="$1" name pid
  [ -f "$dir/pids" ] || return 0
  while read -r name pid; do
    kill -- "-$pid" 2>/dev/null || kill "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 -- "-$pid" 2>/dev/null || true
  done < <(tac "$dir/pids")
}

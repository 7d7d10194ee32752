// The peer of `imagegate controller` in the Tekton benchmark (benches/tekton_peer.rs): a custom
// task in the style Tekton's own custom tasks are written in (Tekton's generated CustomRun
// reconciler on knative.dev/pkg's sharedmain), which does nothing. A CustomRun whose customRef is
// wait.testing.tekton.dev/v1beta1 Wait ends Succeeded once its `duration` param (a Go duration,
// default 0) has passed since it started; with no wait, in the reconcile that first sees it.
//
// The benchmark's issue asks for tektoncd/experimental's wait-task "or the closest buildable one".
// Neither that nor tektoncd/pipeline's test/custom-task-ctrls/wait-task-beta can be built here:
// each is a Go module of its own that the module proxy does not serve (a nested module is not in
// its parent's zip). This program is written for imagegate (not copied from them) to the part of
// their contract a zero wait uses: the same customRef, the same param, the Succeeded condition,
// cancellation, the same libraries (no spec.timeout or retries: a run that waits for nothing
// never reaches them), so what the benchmark compares is the controllers' own work, not the
// libraries'.
package main

import (
	"context"
	"time"

	"github.com/tektoncd/pipeline/pkg/apis/pipeline/v1beta1"
	customruninformer "github.com/tektoncd/pipeline/pkg/client/injection/informers/pipeline/v1beta1/customrun"
	customrunreconciler "github.com/tektoncd/pipeline/pkg/client/injection/reconciler/pipeline/v1beta1/customrun"
	tkncontroller "github.com/tektoncd/pipeline/pkg/controller"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"knative.dev/pkg/configmap"
	"knative.dev/pkg/controller"
	"knative.dev/pkg/injection/sharedmain"
	"knative.dev/pkg/reconciler"
)

const (
	apiVersion = "wait.testing.tekton.dev/v1beta1"
	kind       = "Wait"
	agent      = "imagegate-peer-wait-task"
)

func main() {
	sharedmain.Main(agent, newController)
}

func newController(ctx context.Context, _ configmap.Watcher) *controller.Impl {
	r := &waiter{}
	impl := customrunreconciler.NewImpl(ctx, r, func(*controller.Impl) controller.Options {
		return controller.Options{AgentName: agent}
	})
	r.enqueueAfter = impl.EnqueueAfter
	// Only runs of this task: every other CustomRun of the cluster is left to its own controller.
	if _, err := customruninformer.Get(ctx).Informer().AddEventHandler(cache.FilteringResourceEventHandler{
		FilterFunc: tkncontroller.FilterCustomRunRef(apiVersion, kind),
		Handler:    controller.HandleAll(impl.Enqueue),
	}); err != nil {
		panic(err)
	}
	return impl
}

type waiter struct {
	enqueueAfter func(interface{}, time.Duration)
}

// ReconcileKind moves a run of this task on; the generated reconciler writes the status back.
func (w *waiter) ReconcileKind(_ context.Context, run *v1beta1.CustomRun) reconciler.Event {
	if run.IsDone() {
		return nil
	}
	now := metav1.Now()
	if !run.HasStarted() {
		run.Status.InitializeConditions()
		run.Status.StartTime = &now
	}
	if run.IsCancelled() {
		run.Status.MarkCustomRunFailed(string(v1beta1.CustomRunReasonCancelled), "%s", run.Spec.StatusMessage)
		run.Status.CompletionTime = &now
		return nil
	}
	wait := time.Duration(0)
	for _, p := range run.Spec.Params {
		if p.Name != "duration" {
			continue
		}
		d, err := time.ParseDuration(p.Value.StringVal)
		if err != nil || d < 0 {
			run.Status.MarkCustomRunFailed("InvalidDuration", "param duration %q is not a duration of 0 or more", p.Value.StringVal)
			run.Status.CompletionTime = &now
			return nil
		}
		wait = d
	}
	if left := run.Status.StartTime.Add(wait).Sub(now.Time); left > 0 {
		run.Status.MarkCustomRunRunning("Waiting", "waiting %s", left)
		w.enqueueAfter(run, left)
		return nil
	}
	run.Status.MarkCustomRunSucceeded("DurationElapsed", "waited %s", wait)
	run.Status.CompletionTime = &now
	return nil
}

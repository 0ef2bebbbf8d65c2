package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"

	cbv1beta1 "github.com/berth-dev/berth/api/capacitybuffer/v1beta1"
	"github.com/berth-dev/berth/internal/cloudprovider/kwok"
	"github.com/berth-dev/berth/internal/controller/capacitybuffer"
	"github.com/berth-dev/berth/internal/controller/disruption"
	"github.com/berth-dev/berth/internal/controller/headroom"
	"github.com/berth-dev/berth/internal/controller/launchtimeout"
	"github.com/berth-dev/berth/internal/controller/nodegroup"
	"github.com/berth-dev/berth/internal/controller/nodereserve"
	"github.com/berth-dev/berth/internal/controller/provisioning"
	"github.com/berth-dev/berth/internal/state"
)

// wire creates the controllers, the state they share and the links between
// them, and registers them with the manager. Controllers never import each
// other: what one tells another goes through internal/state and a Notify
// function passed in here.
func (o *options) wire(ctx context.Context, mgr ctrl.Manager, limits corev1.ResourceList) error {
	clk := clock.RealClock{}
	recorder := mgr.GetEventRecorder("berth")
	offerings := state.NewOfferings(clk, o.unavailableTTL)
	readiness := state.NewReadiness()
	cloud := kwok.New(mgr.GetClient(), clk)
	provisioning.RegisterMetrics()
	nodegroup.RegisterMetrics()
	launchtimeout.RegisterMetrics()
	headroom.RegisterMetrics()

	ngc := &nodegroup.Reconciler{Client: mgr.GetClient(), Failures: offerings, Clock: clk}
	lt := &launchtimeout.Reconciler{Client: mgr.GetClient(), Cloud: cloud, Offerings: offerings, Recorder: recorder, Clock: clk, MaxProvisionTime: o.maxProvisionTime}
	hrc := &headroom.Reconciler{Client: mgr.GetClient(), Ready: readiness, Recorder: recorder, Clock: clk}
	nrc := &nodereserve.Reconciler{Client: mgr.GetClient(), Recorder: recorder}
	for name, register := range map[string]func(ctrl.Manager) error{
		nodegroup.Name: ngc.Register, launchtimeout.Name: lt.Register, headroom.Name: hrc.Register, nodereserve.Name: nrc.Register,
	} {
		if err := register(mgr); err != nil {
			return fmt.Errorf("registering %s: %w", name, err)
		}
	}
	offerings.OnChange = ngc.Notify

	var cbc *capacitybuffer.Reconciler
	if _, err := mgr.GetRESTMapper().RESTMapping(schema.GroupKind{Group: cbv1beta1.GroupVersion.Group, Kind: "CapacityBuffer"}); meta.IsNoMatchError(err) {
		ctrl.Log.Info("the CapacityBuffer CRD is not installed; CapacityBuffers are not served (install config/crd/bases/autoscaling.x-k8s.io_capacitybuffers.yaml)")
	} else {
		cbc = &capacitybuffer.Reconciler{Client: mgr.GetClient(), Ready: readiness, Recorder: recorder}
		if err := cbc.Register(mgr); err != nil {
			return fmt.Errorf("registering %s: %w", capacitybuffer.Name, err)
		}
	}
	readiness.OnChange = func(key state.Key) {
		switch key.Owner {
		case state.OwnerHeadroom:
			hrc.Notify(key.Name)
		case state.OwnerCapacityBuffer:
			if cbc != nil {
				cbc.Notify(key.Namespace, key.Name)
			}
		}
	}

	if o.scaleDown {
		disruption.RegisterMetrics()
		dc := disruption.New(disruption.Deps{Client: mgr.GetClient(), Cloud: cloud, Recorder: recorder, Clock: clk},
			disruption.Options{Interval: o.scaleDownInterval, ClusterLimits: limits})
		if err := dc.Register(mgr); err != nil {
			return fmt.Errorf("registering %s: %w", disruption.Name, err)
		}
	}

	prov := provisioning.New(
		provisioning.Deps{Client: mgr.GetClient(), Cloud: cloud, Offerings: offerings, Readiness: readiness, Recorder: recorder, Clock: clk},
		provisioning.Options{BatchIdle: o.batchIdle, BatchMax: o.batchMax, Resync: o.resync, ClusterLimits: limits, MaxProvisionTime: o.maxProvisionTime})
	if err := prov.Register(ctx, mgr); err != nil {
		return fmt.Errorf("registering %s: %w", provisioning.Name, err)
	}
	return nil
}

package controller

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	cbv1beta1 "github.com/berth-dev/berth/api/capacitybuffer/v1beta1"
	"github.com/berth-dev/berth/internal/cloudprovider"
	"github.com/berth-dev/berth/internal/cloudprovider/clusterapi"
	"github.com/berth-dev/berth/internal/cloudprovider/kwok"
	"github.com/berth-dev/berth/internal/cloudprovider/multi"
	"github.com/berth-dev/berth/internal/controller/capacitybuffer"
	"github.com/berth-dev/berth/internal/controller/companion"
	"github.com/berth-dev/berth/internal/controller/disruption"
	"github.com/berth-dev/berth/internal/controller/headroom"
	"github.com/berth-dev/berth/internal/controller/headroomtarget"
	"github.com/berth-dev/berth/internal/controller/launchtimeout"
	"github.com/berth-dev/berth/internal/controller/nodeadoption"
	"github.com/berth-dev/berth/internal/controller/nodegroup"
	"github.com/berth-dev/berth/internal/controller/nodereserve"
	"github.com/berth-dev/berth/internal/controller/provisioning"
	"github.com/berth-dev/berth/internal/controller/standby"
	"github.com/berth-dev/berth/internal/controller/tenant"
	"github.com/berth-dev/berth/internal/planner/scaleup"
	"github.com/berth-dev/berth/internal/state"
	"github.com/berth-dev/berth/internal/webhook"
)

// wire creates the controllers, the state they share and the links between
// them, and registers them with the manager. Controllers never import each
// other: what one tells another goes through internal/state and a Notify
// function passed in here.
func (o *options) wire(mgr ctrl.Manager, limits scaleup.Limits, hook *hookSetup) error {
	clk := clock.RealClock{}
	recorder := mgr.GetEventRecorder("berth")
	offerings := state.NewOfferings(clk, o.unavailableTTL)
	readiness := state.NewReadiness()
	holds := state.NewHoldsFor(clk, o.maxProvisionTime) // a failed launch holds its group at most as long as a launch is given
	activity := state.NewActivity(nil)
	targets := state.NewTargets()
	standbys := state.NewStandby()
	capi, err := o.clusterAPIProvider(mgr, clk)
	if err != nil {
		return err
	}
	var capiCloud cloudprovider.CloudProvider // nil unless enabled (not a nil *clusterapi.Provider)
	if capi != nil {
		capiCloud = capi
	}
	cloud := multi.New(mgr.GetClient(), kwok.New(mgr.GetClient(), clk).WithAPIReader(mgr.GetAPIReader()), capiCloud).WithAPIReader(mgr.GetAPIReader())
	provisioning.RegisterMetrics()
	nodegroup.RegisterMetrics()
	launchtimeout.RegisterMetrics()
	headroom.RegisterMetrics()
	headroomtarget.RegisterMetrics()
	tenant.RegisterMetrics()

	ngc := &nodegroup.Reconciler{Client: mgr.GetClient(), Failures: offerings, Holds: holds, Activity: activity, Clock: clk, Recorder: recorder,
		Removals: cloud, Unadopted: cloud, MaxProvisionTime: o.maxProvisionTime}
	lt := &launchtimeout.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Cloud: cloud, Offerings: offerings, Recorder: recorder, Clock: clk, MaxProvisionTime: o.maxProvisionTime}
	hrc := &headroom.Reconciler{Client: mgr.GetClient(), Ready: readiness, Targets: targets, Standby: standbys, Recorder: recorder, Clock: clk,
		PauseImage: o.pauseImage}
	_, cbErr := mgr.GetRESTMapper().RESTMapping(schema.GroupKind{Group: cbv1beta1.GroupVersion.Group, Kind: "CapacityBuffer"})
	buffers := !meta.IsNoMatchError(cbErr) // decided once: the buffer and standby controllers agree
	sbc := &standby.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Cloud: cloud, Offerings: offerings, Standby: standbys,
		Recorder: recorder, Clock: clk, Buffers: buffers, Limits: limits}
	learner := &headroomtarget.Learner{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Targets: targets, Clock: clk, MinHistory: o.targetMinHistory}
	nrc := &nodereserve.Reconciler{Client: mgr.GetClient(), Recorder: recorder}
	tc := &tenant.Reconciler{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Recorder: recorder, Clock: clk}
	// Registered in a fixed order, so that a failure names the same
	// controller every time.
	type registration struct {
		name     string
		register func(ctrl.Manager) error
	}
	registers := []registration{{nodegroup.Name, ngc.Register}, {launchtimeout.Name, lt.Register}, {headroom.Name, hrc.Register},
		{headroomtarget.Name, learner.Register}, {nodereserve.Name, nrc.Register}, {tenant.Name, tc.Register}, {standby.Name, sbc.Register}}
	if capi != nil {
		registers = append(registers, registration{nodeadoption.Name, (&nodeadoption.Reconciler{Client: mgr.GetClient(), Adopter: capi, Recorder: recorder, Clock: clk}).Register})
	}
	for _, r := range registers {
		if err := r.register(mgr); err != nil {
			return fmt.Errorf("registering %s: %w", r.name, err)
		}
	}
	offerings.OnChange = ngc.Notify
	holds.OnChange = ngc.Notify
	activity.SetOnChange(ngc.Notify)
	targets.OnChange = hrc.Notify

	var cbc *capacitybuffer.Reconciler
	if !buffers {
		ctrl.Log.Info("the CapacityBuffer CRD is not installed; CapacityBuffers are not served (install config/crd/bases/autoscaling.x-k8s.io_capacitybuffers.yaml)")
	} else {
		cbc = &capacitybuffer.Reconciler{Client: mgr.GetClient(), PodReader: mgr.GetAPIReader(), Ready: readiness, Standby: standbys, Recorder: recorder}
		if err := cbc.Register(mgr); err != nil {
			return fmt.Errorf("registering %s: %w", capacitybuffer.Name, err)
		}
	}
	notifyOwner := func(key state.Key) {
		switch key.Owner {
		case state.OwnerHeadroom:
			hrc.Notify(key.Name)
		case state.OwnerCapacityBuffer:
			if cbc != nil {
				cbc.Notify(key.Namespace, key.Name)
			}
		}
	}
	readiness.OnChange, standbys.OnChange = notifyOwner, notifyOwner

	if o.scaleDown {
		disruption.RegisterMetrics()
		dc := disruption.New(disruption.Deps{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Cloud: cloud, Recorder: recorder, Clock: clk, Holds: holds, Offerings: offerings, Activity: activity},
			disruption.Options{Interval: o.scaleDownInterval, Limits: limits, MaxProvisionTime: o.maxProvisionTime, DeletionDelayTimeout: o.deletionDelay})
		if err := dc.Register(mgr); err != nil {
			return fmt.Errorf("registering %s: %w", disruption.Name, err)
		}
	}

	if err := o.wireCompanion(mgr, hook, recorder, clk); err != nil {
		return err
	}

	prov := provisioning.New(
		provisioning.Deps{Client: mgr.GetClient(), Cloud: cloud, Offerings: offerings, Readiness: readiness, Holds: holds, Activity: activity, Recorder: recorder, Clock: clk},
		provisioning.Options{BatchIdle: o.batchIdle, BatchMax: o.batchMax, Resync: o.resync, Limits: limits, MaxProvisionTime: o.maxProvisionTime})
	if err := prov.Register(mgr); err != nil {
		return fmt.Errorf("registering %s: %w", provisioning.Name, err)
	}
	return nil
}

// wireCompanion registers companion headroom: the gate life cycle always
// (pods gated by hand work without the webhook), the webhook and its
// configuration when it is enabled.
func (o *options) wireCompanion(mgr ctrl.Manager, hook *hookSetup, recorder events.EventRecorder, clk clock.PassiveClock) error {
	companion.RegisterMetrics()
	cr := &companion.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: recorder, Clock: clk, PauseImage: o.pauseImage}
	if err := cr.Register(mgr); err != nil {
		return fmt.Errorf("registering %s: %w", companion.Name, err)
	}
	if hook.certs == nil {
		return nil
	}
	mgr.GetWebhookServer().Register(webhook.PodPath, &admission.Webhook{
		Handler: &webhook.PodDefaulter{Reader: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Decoder: admission.NewDecoder(mgr.GetScheme())},
	})
	if err := mgr.Add(hook.certs); err != nil {
		return err
	}
	pr := &companion.ProfileReconciler{Client: mgr.GetClient(), Recorder: recorder, Sync: func(ctx context.Context, want bool) error {
		// The Secret's bundle, not this replica's last copy: another
		// replica may have renewed the certificate since.
		if _, err := hook.certs.Ensure(ctx); err != nil {
			return err
		}
		return hook.config.Ensure(ctx, want, hook.certs.CABundle())
	}}
	if err := pr.Register(mgr); err != nil {
		return fmt.Errorf("registering %s profiles: %w", companion.Name, err)
	}
	return nil
}

// clusterAPIProvider returns the Cluster API provider when it is enabled,
// with an uncached client of the management cluster (the cluster berth
// runs against unless --clusterapi-kubeconfig names another): scale
// decisions read Machines as they are, not as a cache last saw them.
func (o *options) clusterAPIProvider(mgr ctrl.Manager, clk clock.PassiveClock) (*clusterapi.Provider, error) {
	if !o.clusterAPI && o.clusterAPIConfig == "" {
		return nil, nil
	}
	cfg := rest.CopyConfig(mgr.GetConfig())
	if o.clusterAPIConfig != "" {
		var err error
		if cfg, err = clientcmd.BuildConfigFromFlags("", o.clusterAPIConfig); err != nil {
			return nil, fmt.Errorf("loading --clusterapi-kubeconfig: %w", err)
		}
		cfg.QPS, cfg.Burst = o.qps, o.burst
	}
	mgmt, err := client.New(cfg, client.Options{})
	if err != nil {
		return nil, fmt.Errorf("connecting to the Cluster API management cluster: %w", err)
	}
	return clusterapi.New(mgr.GetClient(), mgmt, clk), nil
}

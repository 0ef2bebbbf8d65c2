package scenario

import (
	"context"
	"fmt"
	"sync"

	apiextensions "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/listtype"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	celconfig "k8s.io/apiserver/pkg/apis/cel"

	"github.com/berth-dev/berth/config/crd"
)

// crdValidator applies, offline, what the API server applies to berth's
// custom resources when they are created: defaults, the OpenAPI schema and
// the CEL rules of the embedded CRDs (config/crd). `berth plan` accepts
// exactly the NodeGroups and Headrooms kubectl apply would.
type crdValidator struct {
	structural *structuralschema.Structural
	schema     validation.SchemaValidator
	cel        *cel.Validator
}

var (
	validatorsOnce sync.Once
	validators     map[string]*crdValidator // by "group/version/Kind"
	validatorsErr  error
)

// validatorFor returns the validator of a kind, nil when berth has no CRD
// for it.
func validatorFor(gvk string) (*crdValidator, error) {
	validatorsOnce.Do(func() { validators, validatorsErr = buildValidators() })
	return validators[gvk], validatorsErr
}

func buildValidators() (map[string]*crdValidator, error) {
	crds, err := crd.Objects()
	if err != nil {
		return nil, err
	}
	out := map[string]*crdValidator{}
	for _, c := range crds {
		for _, v := range c.Spec.Versions {
			if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
				continue
			}
			internal := &apiextensions.JSONSchemaProps{}
			if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(v.Schema.OpenAPIV3Schema, internal, nil); err != nil {
				return nil, fmt.Errorf("CRD %s %s: %w", c.Name, v.Name, err)
			}
			ss, err := structuralschema.NewStructural(internal)
			if err != nil {
				return nil, fmt.Errorf("CRD %s %s: %w", c.Name, v.Name, err)
			}
			sv, _, err := validation.NewSchemaValidator(internal)
			if err != nil {
				return nil, fmt.Errorf("CRD %s %s: %w", c.Name, v.Name, err)
			}
			out[c.Spec.Group+"/"+v.Name+"/"+c.Spec.Names.Kind] = &crdValidator{structural: ss, schema: sv, cel: cel.NewValidator(ss, true, celconfig.PerCallLimit)}
		}
	}
	return out, nil
}

// defaultAndValidate defaults the object (JSON) in place as the API server
// would and returns it re-encoded, or the API server's errors.
func (v *crdValidator) defaultAndValidate(js []byte) ([]byte, error) {
	var obj map[string]any
	// Integers as int64, as the API server decodes them (CEL rules compare
	// them as int).
	if err := utiljson.Unmarshal(js, &obj); err != nil {
		return nil, err
	}
	structuraldefaulting.Default(obj, v.structural)
	errs := validation.ValidateCustomResource(nil, obj, v.schema)
	errs = append(errs, listtype.ValidateListSetsAndMaps(nil, v.structural, obj)...)
	if v.cel != nil {
		celErrs, _ := v.cel.Validate(context.Background(), nil, v.structural, obj, nil, celconfig.RuntimeCELCostBudget)
		errs = append(errs, celErrs...)
	}
	if len(errs) > 0 {
		return nil, errs.ToAggregate()
	}
	return utiljson.Marshal(obj)
}

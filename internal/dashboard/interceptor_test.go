package dashboard

import (
	"context"
	"errors"
	"reflect"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// interceptorFailingOn makes List fail for lists of the type of like.
func interceptorFailingOn(like client.ObjectList) interceptor.Funcs {
	return interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
		if reflect.TypeOf(list) == reflect.TypeOf(like) {
			return errors.New("forbidden")
		}
		return c.List(ctx, list, opts...)
	}}
}

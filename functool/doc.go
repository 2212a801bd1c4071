// Package functool turns one typed Go function into a kernel tool.Tool:
//
//	type Args struct {
//		Text string `json:"text" desc:"what to echo"`
//	}
//	echo, err := functool.New(functool.Config{Name: "echo", Effect: tool.ReadOnly, Replay: tool.Safe},
//		func(ctx context.Context, a Args) (string, error) { return a.Text, nil })
//
// The argument type is a struct; its JSON schema is derived from its fields
// (json tags name them, a desc tag describes them, fields without omitempty
// and not pointers are required, unknown fields are refused). Arguments
// that do not decode become a model-visible problem result with code
// invalid_arguments (K7), so the model can correct them. A string result is
// the content; any other result is encoded as JSON.
//
// A function's error becomes the kernel's typed outcome: Problem(...) is a
// model-visible problem result; any other error is an execution error,
// Definitive for a read-only tool and Uncertain for a mutating one (it may
// have half-happened) unless wrapped in Unchanged. Report sends progress
// from inside the function.
//
// The same tool serves compiled plans and plugins (plugins/sdk). It must
// not know about plans, engines, processes or any concrete tool.
package functool

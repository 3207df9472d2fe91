package expr

import (
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/clinkstream/clink/sql/ast"
	"github.com/clinkstream/clink/sql/types"
)

// ScalarFunction is a user-defined scalar function written in Go.
type ScalarFunction struct {
	// Args are the declared argument types; arguments are converted to them
	// implicitly (an INT argument is widened to a declared BIGINT).
	Args []types.Type
	// Result is the result type; it is made nullable unless the function
	// is strict and every argument is NOT NULL.
	Result types.Type
	// Eval computes the result from non-NULL arguments (when Strict) or
	// from arguments that may be NULL. args is only valid during the call.
	Eval func(args []types.Value) (types.Value, error)
	// Strict makes any NULL argument give NULL without calling Eval.
	Strict bool
	// NonDeterministic marks a function whose result may differ between
	// calls with the same arguments; it is never constant-folded.
	NonDeterministic bool
}

// Registry holds user-defined functions by name (case-insensitive, as
// Flink's function names). It is safe for concurrent use.
type Registry struct {
	mu    sync.RWMutex
	funcs map[string]*ScalarFunction
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{funcs: map[string]*ScalarFunction{}} }

// RegisterScalar adds a function under name. It refuses a name that is
// taken, that shadows a built-in function, or a function without Eval.
func (r *Registry) RegisterScalar(name string, fn ScalarFunction) error {
	key := strings.ToUpper(name)
	if fn.Eval == nil {
		return fmt.Errorf("registering function %s: Eval is nil", name)
	}
	if _, ok := builtins[key]; ok || aggregateNames[key] {
		return fmt.Errorf("registering function %s: a built-in function has that name", name)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.funcs == nil {
		r.funcs = map[string]*ScalarFunction{}
	}
	if _, ok := r.funcs[key]; ok {
		return fmt.Errorf("registering function %s: already registered", name)
	}
	r.funcs[key] = &fn
	return nil
}

func (r *Registry) lookup(name string) (*ScalarFunction, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	f, ok := r.funcs[strings.ToUpper(name)]
	return f, ok
}

func (r *Registry) names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var out []string
	for k := range r.funcs {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func (c *compiler) callUDF(pos ast.Pos, f *ScalarFunction, args []*node) (*node, error) {
	if len(args) != len(f.Args) {
		return nil, errorf(pos, "function takes %d argument(s), got %d", len(f.Args), len(args))
	}
	for i, a := range args {
		want := f.Args[i]
		if a.typ.Kind != types.KindNull {
			if ct, ok := commonType(a.typ, want); !ok || !sameKindFamily(ct, want) {
				return nil, errorf(a.pos, "argument %d must be %s, not %s", i+1, typeName(want), typeName(a.typ))
			}
		}
		var err error
		if args[i], err = c.coerce(a, want); err != nil {
			return nil, err
		}
	}
	fns := evals(args)
	strict, eval := f.Strict, f.Eval
	t := f.Result.WithNotNull(f.Result.NotNull && strict && !anyNullable(args...))
	n := &node{typ: t, pos: pos, nondet: f.NonDeterministic, eval: func(row []types.Value) (types.Value, error) {
		vals := make([]types.Value, len(fns))
		for i, fe := range fns {
			v, err := fe(row)
			if err != nil {
				return types.Null, err
			}
			if strict && v.IsNull() {
				return types.Null, nil
			}
			vals[i] = v
		}
		v, err := eval(vals)
		if err != nil {
			return types.Null, &types.Error{Pos: pos, Msg: err.Error()}
		}
		return v, nil
	}}
	if f.NonDeterministic {
		return n, nil
	}
	return derive(t, pos, n.eval, args...), nil
}

// sameKindFamily reports whether widening an argument to ct stays within
// the declared type's kind (an INT may widen to BIGINT, not to STRING).
func sameKindFamily(ct, want types.Type) bool {
	return ct.Kind == want.Kind || ct.Kind.IsString() && want.Kind.IsString()
}

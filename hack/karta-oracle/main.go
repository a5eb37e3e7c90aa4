// Command karta-oracle reads Karta definitions and workload objects with upstream's own library
// (github.com/run-ai/karta at the version pinned in go.mod) and prints what that library makes
// of them, for tests/karta/test_upstream_oracle.py to compare with karta-webhook's reading.
//
// Protocol (one process for a whole batch): stdin holds JSON requests, one per line,
//
//	{"karta": {...a Karta object...}, "objects": [{...}, ...]}
//
// and stdout gets one JSON answer per request, on one line, in the same order:
//
//	{"schema": [errors against upstream's CRD openAPIV3Schema],
//	 "unknownFields": [fields upstream's Go types do not have, as field paths],
//	 "validator": "NewKartaValidator(...).Validate() error" | null,
//	 "objects": [{"build": "tree.Build error" | null,
//	              "phases": [matched statuses] | null,
//	              "components": [{"name", "hasPodDefinition",
//	                              "instances": [{"id", "replicas", "minReplicas",
//	                              "maxReplicas"}] | null (Build failed),
//	                              "paths": {"podTemplateSpecPath": {"paths": [{"path": [...],
//	                                        "null": bool}], "error": str|null}, ...}}]}]}
//
// A request line that is not JSON gets {"error": "..."}; the process goes on with the next.
// The paths of a component's spec are recovered with jq path() through upstream's own runner
// (execution.Runner), the way its writers locate what they assign (AssignZip).
//
// Flags: --crd FILE upstream's CRD (default: run.ai_kartas.yaml beside the executable, where
// hack/build-tools.sh puts it; else the module's own copy found through `go env GOMODCACHE`).
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/kube-openapi/pkg/validation/spec"
	"k8s.io/kube-openapi/pkg/validation/strfmt"
	"k8s.io/kube-openapi/pkg/validation/validate"
	strictjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/run-ai/karta/pkg/api/runai/v1alpha1"
	"github.com/run-ai/karta/pkg/jq/execution"
	"github.com/run-ai/karta/pkg/resource"
	"github.com/run-ai/karta/pkg/tree"
)

const crdFile = "run.ai_kartas.yaml"

type request struct {
	Karta   json.RawMessage  `json:"karta"`
	Objects []map[string]any `json:"objects"`
}

type located struct {
	Path []any `json:"path"`
	Null bool  `json:"null"`
}

type pathsOut struct {
	Paths []located `json:"paths"`
	Error *string   `json:"error"`
}

type instanceOut struct {
	ID          *string `json:"id"`
	Replicas    *int32  `json:"replicas"`
	MinReplicas *int32  `json:"minReplicas"`
	MaxReplicas *int32  `json:"maxReplicas"`
}

type componentOut struct {
	Name             string               `json:"name"`
	HasPodDefinition bool                 `json:"hasPodDefinition"`
	Instances        []instanceOut        `json:"instances"`
	Paths            map[string]*pathsOut `json:"paths"`
}

type objectOut struct {
	Build      *string        `json:"build"`
	Phases     []string       `json:"phases"`
	Components []componentOut `json:"components"`
}

type answer struct {
	Error         *string     `json:"error,omitempty"`
	Schema        []string    `json:"schema"`
	UnknownFields []string    `json:"unknownFields"`
	Validator     *string     `json:"validator"`
	Objects       []objectOut `json:"objects"`
}

func strp(s string) *string { return &s }

func main() {
	crd := flag.String("crd", "", "upstream's Karta CRD (default: "+crdFile+" beside this program)")
	flag.Parse()
	schema, err := loadSchema(*crd)
	if err != nil {
		fmt.Fprintf(os.Stderr, "karta-oracle: %v\n", err)
		os.Exit(2)
	}
	in := bufio.NewReader(os.Stdin)
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	enc := json.NewEncoder(out)
	for {
		line, err := in.ReadBytes('\n')
		if len(strings.TrimSpace(string(line))) > 0 {
			if encErr := enc.Encode(handle(line, schema)); encErr != nil {
				fmt.Fprintf(os.Stderr, "karta-oracle: %v\n", encErr)
				os.Exit(2)
			}
			out.Flush()
		}
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "karta-oracle: reading stdin: %v\n", err)
			os.Exit(2)
		}
	}
}

func handle(line []byte, schema *spec.Schema) answer {
	var req request
	if err := json.Unmarshal(line, &req); err != nil {
		return answer{Error: strp("request: " + err.Error())}
	}
	a := answer{Schema: []string{}, UnknownFields: []string{}, Objects: []objectOut{}}

	var raw any
	if err := json.Unmarshal(req.Karta, &raw); err != nil {
		return answer{Error: strp("karta: " + err.Error())}
	}
	res := validate.NewSchemaValidator(schema, nil, "", strfmt.Default).Validate(raw)
	for _, e := range res.Errors {
		a.Schema = append(a.Schema, e.Error())
	}
	sort.Strings(a.Schema)

	var karta v1alpha1.Karta
	strictErrs, err := strictjson.UnmarshalStrict(req.Karta, &karta)
	if err != nil {
		return answer{Error: strp("karta: " + err.Error())}
	}
	for _, e := range strictErrs {
		a.UnknownFields = append(a.UnknownFields, e.Error())
	}
	if err := v1alpha1.NewKartaValidator(&karta).Validate(); err != nil {
		a.Validator = strp(err.Error())
	}
	for _, obj := range req.Objects {
		a.Objects = append(a.Objects, readObject(&karta, obj))
	}
	return a
}

// readObject builds upstream's workload tree of obj and, apart from it, the jq path() of every
// spec path of every component (so a failed Build still shows where the templates are).
func readObject(karta *v1alpha1.Karta, obj map[string]any) objectOut {
	ctx := context.Background()
	o := objectOut{Components: []componentOut{}}
	factory := resource.NewComponentFactoryFromObject(karta, &unstructured.Unstructured{Object: obj})
	wt, err := tree.Build(ctx, factory)
	instances := map[string][]instanceOut{}
	if err != nil {
		o.Build = strp(err.Error())
	} else {
		if wt.Status != nil {
			o.Phases = wt.Status.Phases
		}
		collect(wt.Children, instances)
	}
	runner := execution.NewDefaultRunner(obj)
	for _, def := range karta.Spec.StructureDefinition.ChildComponents {
		c := componentOut{Name: def.Name, Paths: map[string]*pathsOut{}}
		if component, err := factory.GetComponent(def.Name); err == nil {
			c.HasPodDefinition = component.HasPodDefinition()
		}
		if err == nil {
			c.Instances = instances[def.Name]
			if c.Instances == nil {
				c.Instances = []instanceOut{}
			}
		}
		if sd := def.SpecDefinition; sd != nil {
			for name, p := range map[string]*string{
				"podTemplateSpecPath": sd.PodTemplateSpecPath,
				"podSpecPath":         sd.PodSpecPath,
				"metadataPath":        sd.MetadataPath,
			} {
				if p != nil {
					c.Paths[name] = paths(ctx, runner, *p)
				}
			}
			if f := sd.FragmentedPodSpecDefinition; f != nil {
				for name, p := range map[string]*string{
					"schedulerNamePath": f.SchedulerNamePath,
					"labelsPath":        f.LabelsPath,
					"annotationsPath":   f.AnnotationsPath,
					"containersPath":    f.ContainersPath,
					"containerPath":     f.ContainerPath,
					"resourcesPath":     f.ResourcesPath,
				} {
					if p != nil {
						c.Paths["fragmentedPodSpecDefinition."+name] = paths(ctx, runner, *p)
					}
				}
			}
		}
		o.Components = append(o.Components, c)
	}
	return o
}

// collect flattens the tree by component name: upstream gives every instance of a parent the
// same copy of its children, so the first occurrence of a name stands for all.
func collect(nodes []tree.ComponentNode, into map[string][]instanceOut) {
	for _, n := range nodes {
		if _, seen := into[n.Name]; seen {
			continue
		}
		list := []instanceOut{}
		for _, inst := range n.Instances {
			iv := instanceOut{ID: inst.InstanceKey}
			if inst.Scale != nil {
				iv.Replicas, iv.MinReplicas, iv.MaxReplicas = inst.Scale.Replicas, inst.Scale.MinReplicas, inst.Scale.MaxReplicas
			}
			list = append(list, iv)
		}
		into[n.Name] = list
		for _, inst := range n.Instances {
			collect(inst.Children, into)
		}
	}
}

func paths(ctx context.Context, runner execution.Runner, expr string) *pathsOut {
	query := fmt.Sprintf(". as $__o | path(%s) as $__p | {path: $__p, null: ($__o | getpath($__p) == null)}", expr)
	results, err := runner.Evaluate(ctx, query)
	out := &pathsOut{Paths: []located{}}
	if err != nil {
		// name the definition's expression, not the query wrapped around it
		out.Error = strp(strings.ReplaceAll(err.Error(), query, expr))
		return out
	}
	for _, r := range results {
		m, _ := r.(map[string]any)
		p, _ := m["path"].([]any)
		isNull, _ := m["null"].(bool)
		out.Paths = append(out.Paths, located{Path: p, Null: isNull})
	}
	return out
}

func loadSchema(path string) (*spec.Schema, error) {
	if path == "" {
		path = defaultCRD()
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("upstream's CRD: %w (give --crd FILE)", err)
	}
	var crd struct {
		Spec struct {
			Versions []struct {
				Name   string `json:"name"`
				Schema struct {
					OpenAPIV3Schema json.RawMessage `json:"openAPIV3Schema"`
				} `json:"schema"`
			} `json:"versions"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(data, &crd); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	for _, v := range crd.Spec.Versions {
		if v.Name == "v1alpha1" {
			s := &spec.Schema{}
			if err := json.Unmarshal(v.Schema.OpenAPIV3Schema, s); err != nil {
				return nil, fmt.Errorf("%s: openAPIV3Schema: %w", path, err)
			}
			return s, nil
		}
	}
	return nil, fmt.Errorf("%s: no version v1alpha1", path)
}

func defaultCRD() string {
	if exe, err := os.Executable(); err == nil {
		beside := filepath.Join(filepath.Dir(exe), crdFile)
		if _, err := os.Stat(beside); err == nil {
			return beside
		}
	}
	return crdFile
}

// The Go floor of bench/bench_server.py and bench/bench_apiserver.py: a Go standard-library
// net/http TLS server that does what an admission webhook must at least do: decode the whole
// AdmissionReview and answer with a JSON Patch. Not part of karta-webhook; built and run only
// by the benchmarks.
//
// Without -scheduler and -label the patch is a fixed one (bench_server.py). With them it is
// the patch karta-webhook answers for a JobSet under a policy that sets that schedulerName and
// that label on every pod template (bench_apiserver.py): per replicated job, the label (its
// map, or the metadata, made when missing) and the schedulerName, each only when not already
// so, computed from the object of each review.
//
//	go run . -addr 127.0.0.1:8443 -cert tls.crt -key tls.key [-scheduler NAME -label KEY=VALUE]
package main

import (
	"encoding/base64"
	"encoding/json"
	"flag"
	"io"
	"log"
	"net/http"
	"strconv"
	"strings"
)

var fixed = base64.StdEncoding.EncodeToString([]byte(`[{"op":"add","path":"/x","value":"y"}]`))

var scheduler, labelKey, labelValue string

type op struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value"`
}

// escape is RFC 6901's escaping of one JSON Pointer token.
func escape(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// stamp is the patch that sets the schedulerName and the label on every replicated job's pod
// template of a JobSet (nil when there is nothing to do).
func stamp(obj map[string]any) []op {
	spec, _ := obj["spec"].(map[string]any)
	jobs, _ := spec["replicatedJobs"].([]any)
	var ops []op
	for i, j := range jobs {
		job, _ := j.(map[string]any)
		outer, _ := job["template"].(map[string]any)
		outerSpec, _ := outer["spec"].(map[string]any)
		tmpl, ok := outerSpec["template"].(map[string]any)
		if !ok {
			continue
		}
		base := "/spec/replicatedJobs/" + strconv.Itoa(i) + "/template/spec/template"
		meta, hasMeta := tmpl["metadata"].(map[string]any)
		labels, hasLabels := meta["labels"].(map[string]any)
		switch {
		case hasLabels && labels[labelKey] == labelValue:
		case hasLabels:
			ops = append(ops, op{"add", base + "/metadata/labels/" + escape(labelKey), labelValue})
		case hasMeta:
			ops = append(ops, op{"add", base + "/metadata/labels", map[string]any{labelKey: labelValue}})
		default:
			ops = append(ops, op{"add", base + "/metadata", map[string]any{
				"labels": map[string]any{labelKey: labelValue}}})
		}
		podSpec, _ := tmpl["spec"].(map[string]any)
		if podSpec["schedulerName"] != scheduler {
			ops = append(ops, op{"add", base + "/spec/schedulerName", scheduler})
		}
	}
	return ops
}

func mutate(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 3<<20))
	if err != nil {
		http.Error(w, "cannot read the body", http.StatusBadRequest)
		return
	}
	var review map[string]any
	if err := json.Unmarshal(body, &review); err != nil {
		http.Error(w, "body is not JSON", http.StatusBadRequest)
		return
	}
	req, _ := review["request"].(map[string]any)
	uid, _ := req["uid"].(string)
	resp := map[string]any{"uid": uid, "allowed": true}
	if scheduler == "" {
		resp["patchType"], resp["patch"] = "JSONPatch", fixed
	} else if obj, ok := req["object"].(map[string]any); ok {
		if ops := stamp(obj); len(ops) > 0 {
			patch, _ := json.Marshal(ops)
			resp["patchType"], resp["patch"] = "JSONPatch", base64.StdEncoding.EncodeToString(patch)
		}
	}
	out, _ := json.Marshal(map[string]any{
		"apiVersion": "admission.k8s.io/v1",
		"kind":       "AdmissionReview",
		"response":   resp,
	})
	w.Header().Set("Content-Type", "application/json")
	w.Write(out)
}

func main() {
	addr := flag.String("addr", "127.0.0.1:8443", "listen address")
	cert := flag.String("cert", "tls.crt", "certificate file")
	key := flag.String("key", "tls.key", "key file")
	flag.StringVar(&scheduler, "scheduler", "", "stamp this schedulerName on a JobSet's pod templates")
	label := flag.String("label", "", "and this KEY=VALUE label (with -scheduler)")
	flag.Parse()
	if (scheduler == "") != (*label == "") {
		log.Fatal("-scheduler and -label go together")
	}
	if *label != "" {
		var ok bool
		if labelKey, labelValue, ok = strings.Cut(*label, "="); !ok || labelKey == "" {
			log.Fatalf("-label %q: want KEY=VALUE", *label)
		}
	}
	http.HandleFunc("/mutate", mutate)
	http.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	log.Fatal(http.ListenAndServeTLS(*addr, *cert, *key, nil))
}

// The Go floor of bench/bench_server.py: a Go standard-library net/http TLS server that does
// what an admission webhook must at least do: decode the whole AdmissionReview and answer
// with a fixed JSON Patch. Not part of karta-webhook; built and run only by the benchmark.
//
//	go run . -addr 127.0.0.1:8443 -cert tls.crt -key tls.key
package main

import (
	"encoding/base64"
	"encoding/json"
	"flag"
	"io"
	"log"
	"net/http"
)

var patch = base64.StdEncoding.EncodeToString([]byte(`[{"op":"add","path":"/x","value":"y"}]`))

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
	out, _ := json.Marshal(map[string]any{
		"apiVersion": "admission.k8s.io/v1",
		"kind":       "AdmissionReview",
		"response": map[string]any{
			"uid": uid, "allowed": true, "patchType": "JSONPatch", "patch": patch,
		},
	})
	w.Header().Set("Content-Type", "application/json")
	w.Write(out)
}

func main() {
	addr := flag.String("addr", "127.0.0.1:8443", "listen address")
	cert := flag.String("cert", "tls.crt", "certificate file")
	key := flag.String("key", "tls.key", "key file")
	flag.Parse()
	http.HandleFunc("/mutate", mutate)
	http.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	log.Fatal(http.ListenAndServeTLS(*addr, *cert, *key, nil))
}

// kubecheck reads Kubernetes manifests the way the API server would (strictly, into the
// upstream API types: an unknown or misspelt field is an error, as with kubectl's
// --validate=strict) and checks what stallscope's DaemonSet must hold: least privilege stated
// capability by capability, the host's pids, read-only mounts of the host, resources set.
//
// Usage: go run . FILE.yaml...   (exit 1 and one line per finding when a check fails)
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// The capabilities watch may hold, each for one reason (docs/kubernetes/README.md says which).
var allowedCaps = map[string]bool{
	"SYS_PTRACE": true, "DAC_READ_SEARCH": true, "DAC_OVERRIDE": true, "CHOWN": true,
	"FOWNER": true, "KILL": true, "SYS_NICE": true,
	"BPF": true, "PERFMON": true, "SYSLOG": true,
}

// The host paths watch may mount, and only these: its recordings, and tracefs for its BPF
// program and tracepoint instance. Anything else of the host (a runtime socket, /run, /) is
// refused, read-only or not: a socket is reachable through any mount of a directory above it.
var allowedHostPaths = map[string]bool{"/var/lib/stallscope": true, "/sys/kernel/tracing": true}

type finding struct{ file, what string }

var findings []finding

func fail(file, format string, a ...any) {
	findings = append(findings, finding{file, fmt.Sprintf(format, a...)})
}

// strict decodes YAML into v as the API server does (sigs.k8s.io/json): field names matched
// case-sensitively, and a field the type does not have, or one given twice, is an error.
func strict(doc []byte, v any) error {
	j, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return err
	}
	strictErrs, err := sigsjson.UnmarshalStrict(j, v)
	if err != nil {
		return err
	}
	return errors.Join(strictErrs...)
}

// decode reads one document strictly into a T, then checks it; a document that does not decode
// is a finding.
func decode[T any](where, what, doc string, check func(string, *T)) {
	var v T
	if err := strict([]byte(doc), &v); err != nil {
		fail(where, "not a valid %s: %v", what, err)
		return
	}
	check(where, &v)
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "-cri" {
		criMain(os.Args[2:])
		return
	}
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: kubecheck FILE.yaml...\n       kubecheck -cri DAEMONSET.yaml HOSTDIR")
		os.Exit(2)
	}
	kinds := map[string]int{}
	for _, file := range os.Args[1:] {
		text, err := os.ReadFile(file)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		for i, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(text), -1) {
			if strings.TrimSpace(stripComments(doc)) == "" {
				continue
			}
			where := fmt.Sprintf("%s (document %d)", file, i+1)
			var meta struct {
				APIVersion string `json:"apiVersion"`
				Kind       string `json:"kind"`
			}
			if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
				fail(where, "not YAML: %v", err)
				continue
			}
			kinds[meta.Kind]++
			switch meta.APIVersion + " " + meta.Kind {
			case "apps/v1 DaemonSet":
				decode(where, "apps/v1 DaemonSet", doc, checkDaemonSet)
			case "monitoring.coreos.com/v1 PodMonitor":
				decode(where, "monitoring.coreos.com/v1 PodMonitor", doc, checkPodMonitor)
			case "v1 ServiceAccount":
				decode(where, "v1 ServiceAccount", doc, func(string, *corev1.ServiceAccount) {})
			default:
				fail(where, "kubecheck does not know %s %s", meta.APIVersion, meta.Kind)
			}
		}
	}
	if kinds["DaemonSet"] != 1 {
		fail("manifests", "want exactly one DaemonSet, found %d", kinds["DaemonSet"])
	}
	if kinds["PodMonitor"] != 1 {
		fail("manifests", "want one PodMonitor example, found %d", kinds["PodMonitor"])
	}
	for _, f := range findings {
		fmt.Printf("%s: %s\n", f.file, f.what)
	}
	if len(findings) > 0 {
		os.Exit(1)
	}
	names := []string{}
	for k, n := range kinds {
		names = append(names, fmt.Sprintf("%d %s", n, k))
	}
	sort.Strings(names)
	fmt.Printf("kubecheck: valid: %s\n", strings.Join(names, ", "))
}

func stripComments(doc string) string {
	var b strings.Builder
	for _, l := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

func checkDaemonSet(where string, ds *appsv1.DaemonSet) {
	spec := ds.Spec.Template.Spec
	if !spec.HostPID {
		fail(where, "hostPID must be true: watch finds the node's JVMs in /proc")
	}
	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
		fail(where, "automountServiceAccountToken must be false: watch asks the API server nothing")
	}
	if spec.HostNetwork || spec.HostIPC {
		fail(where, "hostNetwork and hostIPC are not needed")
	}
	if ds.Spec.Selector == nil || len(ds.Spec.Selector.MatchLabels) == 0 {
		fail(where, "the selector names no labels")
	} else {
		for k, v := range ds.Spec.Selector.MatchLabels {
			if ds.Spec.Template.Labels[k] != v {
				fail(where, "the template's labels do not match the selector's %s=%s", k, v)
			}
		}
	}
	if len(spec.InitContainers) > 0 || len(spec.EphemeralContainers) > 0 {
		fail(where, "no init or ephemeral containers: each would need its own least privilege")
	}
	if len(spec.Containers) != 1 {
		fail(where, "want one container, found %d", len(spec.Containers))
		return
	}
	c := spec.Containers[0]
	if len(c.Args) == 0 || c.Args[0] != "watch" {
		fail(where, "the container's args must start with watch")
	}
	metricsPort := false
	for _, p := range c.Ports {
		metricsPort = metricsPort || p.Name == "metrics"
	}
	if !metricsPort {
		fail(where, "no container port named metrics for the PodMonitor to scrape")
	}
	sc := c.SecurityContext
	if sc == nil || sc.Capabilities == nil {
		fail(where, "no securityContext.capabilities: least privilege must be stated")
		return
	}
	if sc.Privileged != nil && *sc.Privileged {
		fail(where, "privileged: true grants every capability and device")
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		fail(where, "allowPrivilegeEscalation must be false")
	}
	if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		fail(where, "readOnlyRootFilesystem must be true")
	}
	if len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" {
		fail(where, "capabilities.drop must be [ALL]")
	}
	for _, cp := range sc.Capabilities.Add {
		if !allowedCaps[string(cp)] {
			fail(where, "capability %s is not one watch uses", cp)
		}
	}
	req, lim := c.Resources.Requests, c.Resources.Limits
	if req.Cpu().IsZero() || req.Memory().IsZero() {
		fail(where, "resources.requests must set cpu and memory")
	}
	if lim.Memory().IsZero() {
		fail(where, "resources.limits must set memory")
	}
	if !lim.Cpu().IsZero() {
		fail(where, "no CPU limit: a throttled recorder is late to the stalls it must sample (CFS quota)")
	}
	volumes := map[string]corev1.Volume{}
	for _, v := range spec.Volumes {
		volumes[v.Name] = v
		if v.HostPath != nil && !allowedHostPaths[v.HostPath.Path] {
			fail(where, "host path %s: watch mounts only %v of the host (a runtime socket is not needed: the pods' names come from the runtime's bundles, read through /proc)", v.HostPath.Path, keys(allowedHostPaths))
		}
	}
	mounted := map[string]bool{}
	for _, m := range c.VolumeMounts {
		mounted[m.Name] = true
		if _, ok := volumes[m.Name]; !ok {
			fail(where, "volumeMount %s names no volume", m.Name)
		}
	}
	for name := range volumes {
		if !mounted[name] {
			fail(where, "volume %s is mounted nowhere", name)
		}
	}
}

func keys(m map[string]bool) []string {
	out := []string{}
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func checkPodMonitor(where string, pm *monitoringv1.PodMonitor) {
	if len(pm.Spec.PodMetricsEndpoints) != 1 {
		fail(where, "want one podMetricsEndpoint")
		return
	}
	e := pm.Spec.PodMetricsEndpoints[0]
	if e.Port == nil || *e.Port != "metrics" {
		fail(where, "the endpoint must scrape the port named metrics")
	}
	if !e.HonorLabels {
		fail(where, "honorLabels must be true: the JVMs' namespace, pod and container labels are watch's, not the scraped pod's")
	}
}

// criMain prints the DaemonSet's pod as the CRI configs a kubelet would give its runtime, for
// crictl (`runp`, `create`): {"pod": PodSandboxConfig, "container": ContainerConfig}, in the
// CRI's JSON names. Its host paths and emptyDirs are put under HOSTDIR (a test's scratch), but
// /sys/kernel/tracing, which is the node's own; the pod's network is the node's (a test node has
// no CNI). Everything else (image, args, ports, the security context, hostPID) is as written.
func criMain(args []string) {
	if len(args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: kubecheck -cri DAEMONSET.yaml HOSTDIR")
		os.Exit(2)
	}
	text, err := os.ReadFile(args[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	var ds appsv1.DaemonSet
	if err := strict([]byte(text), &ds); err != nil {
		fmt.Fprintf(os.Stderr, "%s: not a valid DaemonSet: %v\n", args[0], err)
		os.Exit(1)
	}
	host := args[1]
	spec := ds.Spec.Template.Spec
	if len(spec.Containers) != 1 {
		fmt.Fprintln(os.Stderr, "want one container")
		os.Exit(1)
	}
	c := spec.Containers[0]
	pidMode := 0 // POD
	if spec.HostPID {
		pidMode = 2 // NODE
	}
	pod := map[string]any{
		"metadata":    map[string]any{"name": ds.Name + "-test", "namespace": ds.Namespace, "uid": "kubecheck-" + ds.Name, "attempt": 0},
		"labels":      ds.Spec.Template.Labels,
		"annotations": ds.Spec.Template.Annotations,
		"linux": map[string]any{
			"security_context": map[string]any{
				"namespace_options": map[string]any{"network": 2, "pid": pidMode, "ipc": 0},
			},
		},
	}
	volumes := map[string]string{}
	for _, v := range spec.Volumes {
		switch {
		case v.HostPath != nil && v.HostPath.Path == "/sys/kernel/tracing":
			volumes[v.Name] = v.HostPath.Path
		case v.HostPath != nil:
			volumes[v.Name] = host + "/hostpath" + v.HostPath.Path
		case v.EmptyDir != nil:
			volumes[v.Name] = host + "/emptydir/" + v.Name
		default:
			fmt.Fprintf(os.Stderr, "volume %s: only hostPath and emptyDir are translated\n", v.Name)
			os.Exit(1)
		}
	}
	mounts := []map[string]any{}
	for _, m := range c.VolumeMounts {
		mounts = append(mounts, map[string]any{
			"container_path": m.MountPath, "host_path": volumes[m.Name], "readonly": m.ReadOnly,
		})
	}
	sc := c.SecurityContext
	security := map[string]any{
		"namespace_options": map[string]any{"network": 2, "pid": pidMode, "ipc": 0},
	}
	if sc != nil {
		if sc.Capabilities != nil {
			add, drop := []string{}, []string{}
			for _, cp := range sc.Capabilities.Add {
				add = append(add, string(cp))
			}
			for _, cp := range sc.Capabilities.Drop {
				drop = append(drop, string(cp))
			}
			security["capabilities"] = map[string]any{"add_capabilities": add, "drop_capabilities": drop}
		}
		security["privileged"] = sc.Privileged != nil && *sc.Privileged
		security["readonly_rootfs"] = sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem
		security["no_new_privs"] = sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation
		if sc.RunAsUser != nil {
			security["run_as_user"] = map[string]any{"value": *sc.RunAsUser}
		}
	}
	container := map[string]any{
		"metadata": map[string]any{"name": c.Name},
		"image":    map[string]any{"image": c.Image},
		"args":     c.Args,
		"mounts":   mounts,
		"log_path": c.Name + ".log",
		"linux":    map[string]any{"security_context": security},
	}
	if len(c.Command) > 0 {
		container["command"] = c.Command
	}
	out, _ := json.Marshal(map[string]any{"pod": pod, "container": container, "volumes": volumes})
	fmt.Println(string(out))
}

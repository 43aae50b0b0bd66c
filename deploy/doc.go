// Package deploy holds what runs ScheduleMaster outside a developer's shell
// (the image files, the compose file and Grafana dashboard, the Helm chart,
// the systemd units) and, in its tests, the checks that they work: the image
// is built and run with podman, the compose file is validated with
// podman-compose, the dashboard's metrics are checked against the real ones,
// and the chart is rendered with the Helm SDK and decoded strictly into the
// Kubernetes API types. It has no code of its own.
package deploy

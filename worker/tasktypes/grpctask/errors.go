package grpctask

import "errors"

// Sentinel errors of the grpc executor.
var (
	// ErrNoSpec is a run's error when the task has no grpc definition.
	ErrNoSpec = errors.New("the task has no grpc definition")
	// ErrBearerPlaintext refuses to send a connection's secret as a bearer
	// token in clear over the network: it goes over TLS, or to a loopback
	// address (a local sidecar or proxy) only.
	ErrBearerPlaintext = errors.New("the connection has a secret (sent as a bearer token) but no TLS: turn TLS on, or reach the server on a loopback address")
	// ErrNoReflection is a run's error when the server has no reflection
	// service and the task no descriptor set to describe its method.
	ErrNoReflection = errors.New("the server has no reflection service (v1 nor v1alpha): give the task a descriptor_set")
	// ErrDescriptorSet is a descriptor set that cannot be read.
	ErrDescriptorSet = errors.New("descriptor_set")
	// ErrStreaming is a method that is not unary.
	ErrStreaming = errors.New("only unary methods can be called")
)

package grpctask

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	rpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
)

// Bounds of what a method's description may take.
const (
	// maxMethods is how many resolved methods a connection keeps.
	maxMethods = 64
	// reflectedTTL is how long a method described by reflection is kept:
	// the server may be deployed again with another API.
	reflectedTTL = 10 * time.Minute
	// maxFiles and maxFileBytes bound what reflection may send.
	maxFiles     = 512
	maxFileBytes = 16 << 20
)

// The reflection service's method, v1 and the older v1alpha: their
// messages are the same on the wire, so v1's types serve both.
const (
	reflectV1      = "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo"
	reflectV1Alpha = "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"
)

// method is a resolved method: its descriptor and the types of its files
// (for the Any fields of its JSON).
type method struct {
	desc  protoreflect.MethodDescriptor
	types *dynamicpb.Types
	at    time.Time
	// reflected says it came from the server's reflection service.
	reflected bool
}

// cacheKey files the method of a definition: its name and, when given, the
// hash of its descriptor set.
func cacheKey(name, set string) string {
	if set == "" {
		return name
	}
	sum := sha256.Sum256([]byte(set))
	return name + "\x00" + hex.EncodeToString(sum[:8])
}

// method returns the descriptor of name (package.Service/Method), from c's
// cache, the descriptor set, or the server's reflection service.
func (c *conn) method(ctx context.Context, name, set string) (*method, error) {
	key := cacheKey(name, set)
	c.mu.Lock()
	m, ok := c.methods[key]
	c.mu.Unlock()
	if ok && (!m.reflected || time.Since(m.at) < reflectedTTL) {
		return m, nil
	}
	svc, meth, _ := strings.Cut(name, "/")
	var files *protoregistry.Files
	var err error
	if set != "" {
		files, err = filesOfSet(set)
	} else {
		files, err = reflectFiles(ctx, c.cc, svc)
	}
	if err != nil {
		return nil, err
	}
	d, err := files.FindDescriptorByName(protoreflect.FullName(svc))
	if err != nil {
		return nil, fmt.Errorf("service %s is not described: %w", svc, err)
	}
	sd, ok := d.(protoreflect.ServiceDescriptor)
	if !ok {
		return nil, fmt.Errorf("%s is not a service", svc)
	}
	md := sd.Methods().ByName(protoreflect.Name(meth))
	if md == nil {
		return nil, fmt.Errorf("service %s has no method %s", svc, meth)
	}
	if md.IsStreamingClient() || md.IsStreamingServer() {
		return nil, fmt.Errorf("%s streams: %w", name, ErrStreaming)
	}
	m = &method{desc: md, types: dynamicpb.NewTypes(files), at: time.Now(), reflected: set == ""}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.methods[key] = m
	for len(c.methods) > maxMethods {
		var oldest string
		for k, v := range c.methods {
			if oldest == "" || v.at.Before(c.methods[oldest].at) {
				oldest = k
			}
		}
		delete(c.methods, oldest)
	}
	return m, nil
}

// forget drops the method of a definition, which the server no longer
// implements as described.
func (c *conn) forget(name, set string) {
	c.mu.Lock()
	delete(c.methods, cacheKey(name, set))
	c.mu.Unlock()
}

// filesOfSet reads a base64 FileDescriptorSet.
func filesOfSet(set string) (*protoregistry.Files, error) {
	b, err := base64.StdEncoding.DecodeString(set)
	if err != nil {
		return nil, fmt.Errorf("%w: not base64: %v", ErrDescriptorSet, err)
	}
	var fds descriptorpb.FileDescriptorSet
	if err := proto.Unmarshal(b, &fds); err != nil {
		return nil, fmt.Errorf("%w: not a FileDescriptorSet: %v", ErrDescriptorSet, err)
	}
	files, err := buildFiles(fds.File)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrDescriptorSet, err)
	}
	return files, nil
}

// buildFiles makes a registry of protos, completed with the well-known
// files this program links in (google/protobuf/*.proto) when a set was
// made without --include_imports.
func buildFiles(protos []*descriptorpb.FileDescriptorProto) (*protoregistry.Files, error) {
	have := make(map[string]bool, len(protos))
	for _, p := range protos {
		have[p.GetName()] = true
	}
	for i := 0; i < len(protos); i++ {
		for _, dep := range protos[i].GetDependency() {
			if have[dep] {
				continue
			}
			have[dep] = true
			if fd, err := protoregistry.GlobalFiles.FindFileByPath(dep); err == nil {
				protos = append(protos, protodesc.ToFileDescriptorProto(fd))
			}
		}
	}
	return protodesc.NewFiles(&descriptorpb.FileDescriptorSet{File: protos})
}

// reflectFiles asks the server's reflection service (v1, else v1alpha) for
// the file that defines service and the files it imports.
func reflectFiles(ctx context.Context, cc *grpc.ClientConn, service string) (*protoregistry.Files, error) {
	var protos []*descriptorpb.FileDescriptorProto
	err := reflectSession(ctx, cc, func(ask askFunc) error {
		got := map[string]bool{}
		size := 0
		add := func(resp *rpb.ServerReflectionResponse) error {
			fdr := resp.GetFileDescriptorResponse()
			if fdr == nil {
				return fmt.Errorf("reflection answered %T, not files", resp.GetMessageResponse())
			}
			for _, b := range fdr.GetFileDescriptorProto() {
				size += len(b)
				if size > maxFileBytes || len(got) >= maxFiles {
					return fmt.Errorf("reflection sent more than %d files or %d bytes", maxFiles, maxFileBytes)
				}
				fd := &descriptorpb.FileDescriptorProto{}
				if err := proto.Unmarshal(b, fd); err != nil {
					return fmt.Errorf("reflection sent a file that is not a FileDescriptorProto: %w", err)
				}
				if !got[fd.GetName()] {
					got[fd.GetName()] = true
					protos = append(protos, fd)
				}
			}
			return nil
		}
		resp, err := ask(&rpb.ServerReflectionRequest{MessageRequest: &rpb.ServerReflectionRequest_FileContainingSymbol{FileContainingSymbol: service}})
		if err != nil {
			return err
		}
		if err := add(resp); err != nil {
			return err
		}
		// The server sends the imports too, but may leave out those it
		// sent before on the stream: ask for any still missing.
		for i := 0; i < len(protos); i++ {
			for _, dep := range protos[i].GetDependency() {
				if got[dep] {
					continue
				}
				resp, err := ask(&rpb.ServerReflectionRequest{MessageRequest: &rpb.ServerReflectionRequest_FileByFilename{FileByFilename: dep}})
				if err != nil {
					return err
				}
				if resp.GetErrorResponse() != nil {
					got[dep] = true // buildFiles may know it (a well-known file)
					continue
				}
				if err := add(resp); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if errors.Is(err, ErrNoReflection) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("describe %s by reflection: %w", service, err)
	}
	files, err := buildFiles(protos)
	if err != nil {
		return nil, fmt.Errorf("the files reflection sent do not build: %w", err)
	}
	return files, nil
}

// askFunc sends one reflection request and returns its answer; an error
// answer is returned as a response for FileByFilename, an error otherwise.
type askFunc func(*rpb.ServerReflectionRequest) (*rpb.ServerReflectionResponse, error)

// reflectSession runs fn on a reflection stream: v1, else v1alpha when the
// server does not implement v1.
func reflectSession(ctx context.Context, cc *grpc.ClientConn, fn func(ask askFunc) error) error {
	for _, path := range []string{reflectV1, reflectV1Alpha} {
		err := reflectOn(ctx, cc, path, fn)
		if status.Code(err) == codes.Unimplemented {
			continue
		}
		return err
	}
	return ErrNoReflection
}

func reflectOn(ctx context.Context, cc *grpc.ClientConn, path string, fn func(ask askFunc) error) error {
	ctx, cancel := context.WithCancel(ctx) // ends the stream, however fn returns
	defer cancel()
	stream, err := cc.NewStream(ctx, &grpc.StreamDesc{StreamName: "ServerReflectionInfo", ServerStreams: true, ClientStreams: true}, path)
	if err != nil {
		return err
	}
	err = fn(func(req *rpb.ServerReflectionRequest) (*rpb.ServerReflectionResponse, error) {
		if err := stream.SendMsg(req); err != nil {
			if errors.Is(err, io.EOF) {
				// The server ended the stream: RecvMsg has its status.
				err = stream.RecvMsg(&rpb.ServerReflectionResponse{})
			}
			return nil, err
		}
		resp := &rpb.ServerReflectionResponse{}
		if err := stream.RecvMsg(resp); err != nil {
			return nil, err
		}
		if e := resp.GetErrorResponse(); e != nil {
			if _, byName := req.GetMessageRequest().(*rpb.ServerReflectionRequest_FileByFilename); byName {
				return resp, nil
			}
			return nil, fmt.Errorf("reflection: %s (%s)", e.GetErrorMessage(), codes.Code(uint32(e.GetErrorCode()))) //nolint:gosec // a status code
		}
		return resp, nil
	})
	_ = stream.CloseSend()
	return err
}

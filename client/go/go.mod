module egress.internal/client

go 1.19

// The versions Debian 12's Go packages carry (golang-google-grpc-dev and what it needs),
// as client/go/goproxy.py serves them. github.com/golang/protobuf: the 1.5 API, which
// grpc-go 1.33 marshals through for the messages protoc-gen-go 1.28 generates.
require (
	github.com/golang/protobuf v1.5.2 // indirect
	google.golang.org/genproto v0.0.0-20200526211855-cb27e3aa2013
	google.golang.org/grpc v1.33.3
	google.golang.org/protobuf v1.28.1
)

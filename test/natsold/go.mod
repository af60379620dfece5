// nats-server 2.11, built from its Go module: a server too old for toold
// (no message schedules), which internal/state's TestRefusesAServerTooOld
// must refuse. Not part of toold; .ci/run builds it with
//   (cd test/natsold && go build -o BIN/nats-server-2.11 github.com/nats-io/nats-server/v2)
module github.com/toold/toold/test/natsold

go 1.26

tool github.com/nats-io/nats-server/v2

require (
	github.com/antithesishq/antithesis-sdk-go v0.7.0-default-no-op // indirect
	github.com/google/go-tpm v0.9.8 // indirect
	github.com/klauspost/compress v1.18.5 // indirect
	github.com/minio/highwayhash v1.0.4 // indirect
	github.com/nats-io/jwt/v2 v2.8.1 // indirect
	github.com/nats-io/nats-server/v2 v2.11.17 // indirect
	github.com/nats-io/nkeys v0.4.15 // indirect
	github.com/nats-io/nuid v1.0.1 // indirect
	go.uber.org/automaxprocs v1.6.0 // indirect
	golang.org/x/crypto v0.50.0 // indirect
	golang.org/x/sys v0.43.0 // indirect
	golang.org/x/time v0.15.0 // indirect
)

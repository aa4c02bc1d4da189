# The operator image: manager, sidecar and tools in one static binary.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /out/workerd-operator ./cmd/workerd-operator

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/workerd-operator /workerd-operator
USER 65532:65532
ENTRYPOINT ["/workerd-operator"]

# Builds the outbox-relay image used by docker-compose.yml.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /out/outbox-relay ./cmd/outbox-relay

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/outbox-relay /usr/local/bin/outbox-relay
ENTRYPOINT ["/usr/local/bin/outbox-relay"]
CMD ["run"]

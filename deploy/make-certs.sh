#!/usr/bin/env bash
# Makes a private certificate authority and certificates for a lab's farm, with openssl:
#   deploy/make-certs.sh OUT_DIR [SERVER_NAME ...] [--agent NAME ...]
# OUT_DIR/ca.pem and ca.key: the lab's CA (keep ca.key offline once the certificates are made).
# OUT_DIR/server.pem and server.key: one certificate for trackerd and tunerd, valid for every
#   SERVER_NAME given (host names or IP addresses; default: localhost and 127.0.0.1).
# OUT_DIR/agent-NAME.pem and .key: client certificates for mutual TLS between agents and trackerd.
# Keys are written with mode 0600. Certificates last 825 days (what clients accept for servers).
set -euo pipefail

if [[ $# -lt 1 || "$1" == -* ]]; then
  sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
fi
out="$1"
shift
servers=()
agents=()
while [[ $# -gt 0 ]]; do
  if [[ "$1" == "--agent" ]]; then
    [[ $# -ge 2 ]] || { echo "make-certs: --agent needs a name" >&2; exit 2; }
    agents+=("$2")
    shift 2
  else
    servers+=("$1")
    shift
  fi
done
[[ ${#servers[@]} -gt 0 ]] || servers=(localhost 127.0.0.1)

mkdir -p "$out"
umask 077
days=825

if [[ ! -f "$out/ca.key" ]]; then
  openssl req -x509 -newkey rsa:3072 -nodes -keyout "$out/ca.key" -out "$out/ca.pem" -days 3650 \
    -subj "/CN=tunefarm lab CA" -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
fi

# Signs NAME's key with the CA; $2 is the extension block (server or client use, alternative names).
sign() {
  local name="$1" extensions="$2" subject="$3"
  openssl req -newkey rsa:3072 -nodes -keyout "$out/$name.key" -out "$out/$name.csr" -subj "/CN=$subject" 2>/dev/null
  openssl x509 -req -in "$out/$name.csr" -CA "$out/ca.pem" -CAkey "$out/ca.key" -CAcreateserial \
    -out "$out/$name.pem" -days "$days" -extfile <(printf '%s\n' "$extensions") 2>/dev/null
  rm -f "$out/$name.csr"
}

alt=""
for s in "${servers[@]}"; do
  if [[ "$s" =~ ^[0-9.]+$ || "$s" == *:* ]]; then alt+="IP:$s,"; else alt+="DNS:$s,"; fi
done
sign server "basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=${alt%,}" "${servers[0]}"

for a in "${agents[@]}"; do
  [[ "$a" =~ ^[A-Za-z0-9._-]+$ ]] || { echo "make-certs: agent name '$a' may hold only [A-Za-z0-9._-]" >&2; exit 2; }
  sign "agent-$a" "basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=clientAuth" "$a"
done

chmod 644 "$out"/*.pem
openssl verify -CAfile "$out/ca.pem" "$out/server.pem" >/dev/null
echo "make-certs: CA, server certificate for ${servers[*]}${agents:+ and agents ${agents[*]}} in $out"

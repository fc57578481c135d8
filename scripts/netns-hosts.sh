# scripts/netns-hosts.sh — hosts made of network namespaces, for tests and benchmarks of
# clusters across hosts on one machine (root). Source it, then:
#
#   netns_hosts_up N NAME [RATE]   N hosts NAME0..NAME(N-1): namespaces with their own
#                                  address on one bridge (veth pairs), loopback up, the
#                                  others' names in their /etc/hosts (ip netns exec mounts
#                                  /etc/netns/NS/hosts), each link shaped to RATE each way
#                                  with tc tbf when given (e.g. 1gbit). 0, or 1 with a
#                                  reason in NETNS_WHY (not root, no bridge, ...).
#   netns_hosts_down               removes them (also call it after a failed up)
#   netns_host_ns H                the namespace of host H (a name or its address)
#   netns_hosts_agent FILE         writes an AU_RSH / plm_rsh_agent agent to FILE: "FILE
#                                  HOST COMMAND..." runs COMMAND in HOST's namespace, as
#                                  ssh HOST would run it on a real host
#
# Sets NETNS_SUBNET (a /24 no interface of this machine uses, as A.B.C), NETNS_BRIDGE,
# NETNS_NS (the namespaces) and NETNS_LIST (NAME0,NAME1,...). These kernels lack netem:
# added delay stays the transport's test option (AU_NET_DELAY_US).

netns_hosts_up() {
  local n=$1 name=$2 rate=${3:-} tag=$$ h third
  NETNS_NS=() NETNS_LIST="" NETNS_WHY="" NETNS_NAME=$name NETNS_TAG=$tag
  NETNS_BRIDGE=nb$((tag % 1000000))
  [ "$(id -u)" -eq 0 ] || { NETNS_WHY="not root: network namespaces need it"; return 1; }
  command -v ip >/dev/null || { NETNS_WHY="no ip command"; return 1; }
  ip link add "$NETNS_BRIDGE" type bridge 2>/dev/null || { NETNS_WHY="cannot make a bridge here"; return 1; }
  ip link set "$NETNS_BRIDGE" up
  NETNS_SUBNET=""
  for third in $(seq $((tag % 200 + 20)) 250) $(seq 20 $((tag % 200 + 19))); do
    if ! ip -4 addr show | grep -q "inet 10\.231\.$third\."; then
      NETNS_SUBNET=10.231.$third
      break
    fi
  done
  [ -n "$NETNS_SUBNET" ] || { NETNS_WHY="no free subnet"; return 1; }
  local names=""
  for h in $(seq 0 $((n - 1))); do names+="$NETNS_SUBNET.$((h + 1)) $name$h"$'\n'; done
  for h in $(seq 0 $((n - 1))); do
    local ns=nh$tag-$h
    ip netns add "$ns" 2>/dev/null || { NETNS_WHY="cannot make a network namespace here"; return 1; }
    NETNS_NS+=("$ns")
    ip link add "nv$tag$h" type veth peer name "np$tag$h" 2>/dev/null ||
      { NETNS_WHY="cannot make veth pairs here"; return 1; }
    ip link set "np$tag$h" netns "$ns"
    ip link set "nv$tag$h" master "$NETNS_BRIDGE" up
    ip -n "$ns" link set lo up
    ip -n "$ns" link set "np$tag$h" name eth0
    ip -n "$ns" addr add "$NETNS_SUBNET.$((h + 1))/24" dev eth0
    ip -n "$ns" link set eth0 up
    if [ -n "$rate" ]; then # out of the host (its eth0), and into it (the bridge's end)
      ip netns exec "$ns" tc qdisc add dev eth0 root tbf rate "$rate" burst 256kb latency 20ms &&
        tc qdisc add dev "nv$tag$h" root tbf rate "$rate" burst 256kb latency 20ms ||
        { NETNS_WHY="cannot shape the links (tc tbf)"; return 1; }
    fi
    mkdir -p "/etc/netns/$ns"
    printf '127.0.0.1 localhost\n%s' "$names" >"/etc/netns/$ns/hosts"
    NETNS_LIST+="${NETNS_LIST:+,}$name$h"
  done
  # the hosts see each other: a connection to a closed port is refused, not lost
  local probe
  probe=$(ip netns exec "${NETNS_NS[$((n > 1 ? 1 : 0))]}" timeout 5 bash -c "exec 3<>/dev/tcp/${name}0/9" 2>&1)
  grep -q refused <<<"$probe" || { NETNS_WHY="the hosts cannot reach each other ($probe)"; return 1; }
  return 0
}

netns_hosts_down() {
  local ns
  for ns in "${NETNS_NS[@]}"; do
    ip netns del "$ns" 2>/dev/null
    rm -rf "/etc/netns/$ns"
  done
  NETNS_NS=()
  [ -n "${NETNS_BRIDGE:-}" ] && ip link del "$NETNS_BRIDGE" 2>/dev/null
  NETNS_BRIDGE=""
}

netns_host_ns() {
  case $1 in
  "$NETNS_NAME"*) echo "nh$NETNS_TAG-${1#"$NETNS_NAME"}" ;;
  *) echo "nh$NETNS_TAG-$((${1##*.} - 1))" ;;
  esac
}

netns_hosts_agent() {
  printf '#!/usr/bin/env bash\n# HOST COMMAND...: COMMAND in HOST'"'"'s namespace, as ssh HOST would run it\nhost=$1\nshift\ncase $host in\n%s*) h=${host#%s} ;;\n*) h=$((${host##*.} - 1)) ;;\nesac\nexec ip netns exec "nh%s-$h" sh -c "$*"\n' \
    "$NETNS_NAME" "$NETNS_NAME" "$NETNS_TAG" >"$1"
  chmod +x "$1"
}

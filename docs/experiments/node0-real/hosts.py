#!/usr/bin/env python3
"""Step-2 probe: 3 fake discovery agents (agent token, X-Secret-Key) register into the InfraEnv and
answer steps for ROUNDS rounds; then print each host's status and non-success validations."""
import json, os, sys, time, urllib.request
D = os.environ.get("SPIKE_DIR", "/tmp/node0-real"); API = "http://127.0.0.1:8090/api/assisted-install/v2"
AG = open(f"{D}/keys/agent").read().strip(); US = open(f"{D}/keys/user").read().strip()
IE = sys.argv[1]; ROUNDS = int(os.environ.get("ROUNDS", "6"))
def req(m, path, body=None, user=False):
    h = {"Content-Type": "application/json"}
    h["Authorization" if user else "X-Secret-Key"] = US if user else AG
    r = urllib.request.Request(API + path, method=m, headers=h, data=None if body is None else json.dumps(body).encode())
    try:
        with urllib.request.urlopen(r) as x: b = x.read(); return x.status, (json.loads(b) if b else None)
    except urllib.error.HTTPError as e: return e.code, e.read().decode()[:300]
H = [dict(id=f"11111111-2222-3333-4444-00000000003{i}", name=f"master-{i}", ip=f"192.168.111.3{i}", mac=f"52:54:00:aa:00:3{i}") for i in range(3)]
def inventory(h):
    return {"hostname": h["name"], "boot": {"current_boot_mode": "uefi", "device_type": "ephemeral"},
      "cpu": {"architecture": "x86_64", "count": 8, "flags": ["vmx", "avx2", "sse4_2"], "model_name": "QEMU"},
      "memory": {"physical_bytes": 34359738368, "usable_bytes": 33285996544},
      "disks": [{"id": "/dev/disk/by-path/pci-0000:04:00.0", "by_path": "/dev/disk/by-path/pci-0000:04:00.0", "name": "vda",
        "path": "/dev/vda", "drive_type": "HDD", "size_bytes": 128849018880, "serial": "vd-" + h["mac"].replace(":", ""),
        "removable": False, "is_installation_media": False, "io_perf": {}}],
      "interfaces": [{"name": "enp1s0", "mac_address": h["mac"], "mtu": 1500, "flags": ["up", "broadcast"],
        "ipv4_addresses": [h["ip"] + "/24"], "ipv6_addresses": [], "has_carrier": True, "speed_mbps": 10000, "type": "physical"}],
      "routes": [{"destination": "0.0.0.0", "gateway": "192.168.111.1", "interface": "enp1s0", "family": 2}],
      "system_vendor": {"manufacturer": "Red Hat", "product_name": "KVM", "serial_number": h["id"], "virtual": True},
      "tpm_version": "none"}
LB = "192.168.111.5"
def answer(h, s):
    t = s["step_type"]; args = s.get("args") or []
    rq = None
    for a in reversed(args):
        try:
            v = json.loads(a)
            if isinstance(v, (dict, list)): rq = v; break
        except Exception: pass
    if t == "inventory": return inventory(h)
    if t == "connectivity-check":
        return {"remote_hosts": [{"host_id": r["host_id"], "l2_connectivity": [], "mtu_report": [],
            "l3_connectivity": [{"remote_ip_address": a.split("/")[0], "successful": True, "average_rtt_ms": 0.1, "packet_loss_percentage": 0}
                                for n in r.get("nics", []) for a in n.get("ip_addresses", [])]} for r in (rq if isinstance(rq, list) else (rq or {}).get("remote_hosts", []))]}
    if t == "ntp-synchronizer": return {"ntp_sources": [{"source_name": "192.168.111.1", "source_state": "synced"}]}
    if t == "installation-disk-speed-check": return {"path": (rq or {}).get("path", "/dev/vda"), "io_sync_duration": 2}
    if t == "free-network-addresses": return [{"network": n if isinstance(n, str) else n.get("network"), "free_addresses": []} for n in (rq or [])]
    if t == "domain-resolution":
        return {"resolutions": [{"domain_name": d["domain_name"], "ipv4_addresses": [] if "validateNoWildcardDNS" in d["domain_name"] else [LB],
                                 "ipv6_addresses": [], "cnames": []} for d in (rq or {}).get("domains", [])]}
    if t == "container-image-availability":
        return {"images": [{"name": i, "result": "success", "download_rate": 100.0, "size_bytes": 1, "time": 0.1} for i in (rq or {}).get("images", [])]}
    return ""
for h in H:
    c, b = req("POST", f"/infra-envs/{IE}/hosts", {"host_id": h["id"], "discovery_agent_version": "quay.io/x/agent:latest"})
    print("register", h["name"], c, "" if c == 201 else b)
seen = set()
for rnd in range(ROUNDS):
    for h in H:
        c, b = req("GET", f"/infra-envs/{IE}/hosts/{h['id']}/instructions?timestamp={int(time.time())}")
        if c != 200: print("next-steps", h["name"], c, b); continue
        for s in b.get("instructions") or []:
            t = s["step_type"]
            if (h["name"], t) not in seen: seen.add((h["name"], t)); print(f"  {h['name']} step {t} args={json.dumps(s.get('args'))[:160]}")
            out = answer(h, s)
            c2, b2 = req("POST", f"/infra-envs/{IE}/hosts/{h['id']}/instructions",
                         {"step_id": s["step_id"], "step_type": t, "exit_code": 0, "output": out if isinstance(out, str) else json.dumps(out), "error": ""})
            if c2 != 204: print("  reply", h["name"], t, c2, b2)
    time.sleep(float(os.environ.get("PAUSE", "9")))
c, hosts = req("GET", f"/infra-envs/{IE}/hosts", user=True)
for x in hosts if c == 200 else []:
    print(f"host {x['requested_hostname']} status={x['status']} role={x['role']} bootstrap={x.get('bootstrap')} info={x['status_info']}")
    for grp in json.loads(x.get("validations_info") or "{}").values():
        for v in grp:
            if v["status"] != "success": print(f"    {v['status']}\t{v['id']}\t{v['message']}")
if os.environ.get("INSTALL"):
    c, cl = req("GET", "/clusters", user=True); cid = cl[0]["id"]
    c, b = req("POST", f"/clusters/{cid}/actions/install", user=True)
    print("install", c, b if c != 202 else f"-> {b['status']}: {b['status_info']}")
    for rnd in range(int(os.environ.get("IROUNDS", "8"))):
        for h in H:
            c, b = req("GET", f"/infra-envs/{IE}/hosts/{h['id']}/instructions?timestamp={int(time.time())}")
            if c != 200: print("next-steps", h["name"], c, b); continue
            for s in b.get("instructions") or []:
                t = s["step_type"]
                if (h["name"], t) not in seen: seen.add((h["name"], t)); print(f"  {h['name']} step {t} args={json.dumps(s.get('args'))[:200]}")
                out = answer(h, s)
                c2, b2 = req("POST", f"/infra-envs/{IE}/hosts/{h['id']}/instructions",
                             {"step_id": s["step_id"], "step_type": t, "exit_code": 0, "output": out if isinstance(out, str) else json.dumps(out), "error": ""})
                if c2 != 204: print("  reply", h["name"], t, c2, b2)
        c, x = req("GET", f"/clusters/{cid}", user=True)
        print(f"round {rnd}: cluster {x['status']}: {x['status_info']} | " + ", ".join(f"{y['requested_hostname']}={y['status']}/{y['role']}{'/BOOTSTRAP' if y.get('bootstrap') else ''}" for y in x.get("hosts") or []))
        time.sleep(float(os.environ.get("PAUSE", "9")))

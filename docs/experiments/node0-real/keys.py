#!/usr/bin/env python3
"""Generate an ES256 key pair and the three tokens (userAuth/agentAuth/watcherAuth), no exp,
as agent-based installer mints them. Writes keys/{priv.pem,pub.pem,pub.b64,user,agent,watcher}."""
import base64, json, os
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives import serialization, hashes
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature
os.makedirs("keys", exist_ok=True)
k = ec.generate_private_key(ec.SECP256R1())
pub = k.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
open("keys/priv.pem", "wb").write(k.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
open("keys/pub.pem", "wb").write(pub)
open("keys/pub.b64", "w").write(base64.b64encode(pub).decode())
b64u = lambda b: base64.urlsafe_b64encode(b).rstrip(b"=").decode()
def sign(claims):
    h = b64u(json.dumps({"alg": "ES256", "typ": "JWT"}).encode()) + "." + b64u(json.dumps(claims).encode())
    r, s = decode_dss_signature(k.sign(h.encode(), ec.ECDSA(hashes.SHA256())))
    return h + "." + b64u(r.to_bytes(32, "big") + s.to_bytes(32, "big"))
for name, scheme in [("user", "userAuth"), ("agent", "agentAuth"), ("watcher", "watcherAuth")]:
    open(f"keys/{name}", "w").write(sign({"auth_scheme": scheme}))
print("ok")

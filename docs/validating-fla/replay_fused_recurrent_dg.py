"""Replays the arithmetic of FLA's fused_recurrent backward (fla/ops/common/fused_recurrent.py,
fla-core 0.6.0, USE_GK) in float32 for one ttrcheck backward case, without a GPU or NumPy:
every operation rounded to fp32 as the kernel does, dg by its reverse running sum
    dgk = Σ_v h_T ⊙ dh_T;  for t = T-1..0: dgk += q_t ⊙ dq_t − k_t ⊙ dk_t;  dg[t] = dgk
Writes a candidate whose dq, dk, dv are the oracle's rounded to fp32 and whose dg is the
replay's, so that `ttrcheck check --backward --form sequential --dtype fp32` judges dg alone.
    python3 fla_fused_recurrent_dg.py <case>.backward.inputs.safetensors <case>.backward.oracle.safetensors out.safetensors
"""
import json, math, struct, sys

def read(path):
    b = open(path, 'rb').read(); n = struct.unpack('<Q', b[:8])[0]; h = json.loads(b[8:8 + n]); body = b[8 + n:]
    out = {}
    for k, v in h.items():
        if k == '__metadata__': continue
        s, e = v['data_offsets']; fmt = {'F32': 'f', 'F64': 'd'}[v['dtype']]
        cnt = (e - s) // struct.calcsize(fmt)
        out[k] = (v['shape'], list(struct.unpack('<%d%s' % (cnt, fmt), body[s:e])))
    return out, h.get('__metadata__', {})

def write(path, tensors, meta):
    header, body = {'__metadata__': meta}, b''
    for k, (shape, vals) in sorted(tensors.items()):
        data = struct.pack('<%df' % len(vals), *vals)
        header[k] = {'dtype': 'F32', 'shape': shape, 'data_offsets': [len(body), len(body) + len(data)]}
        body += data
    h = json.dumps(header).encode(); h += b' ' * ((8 - len(h) % 8) % 8)
    open(path, 'wb').write(struct.pack('<Q', len(h)) + h + body)

f32 = lambda x: struct.unpack('f', struct.pack('f', x))[0]

inp, meta = read(sys.argv[1]); orc, _ = read(sys.argv[2])
(B, T, H, K), q = inp['q']; k = inp['k'][1]; g = inp['g'][1]; scalar = len(inp['g'][0]) == 3  # simple_gla: USE_G
V = inp['v'][0][3]; v = inp['v'][1]; do = inp['do'][1]
dht = inp['dht'][1] if 'dht' in inp else [0.0] * (B * H * K * V)
h0 = inp['h0'][1] if 'h0' in inp else [0.0] * (B * H * K * V)
scale = f32(K ** -0.5)
x = lambda a, b_, t, h, i, W: a[((b_ * T + t) * H + h) * W + i]
gate = (lambda b_, t, h, i: g[(b_ * T + t) * H + h]) if scalar else (lambda b_, t, h, i: x(g, b_, t, h, i, K))
dg = [0.0] * (B * T * H * (1 if scalar else K))
for b_ in range(B):
    for h in range(H):
        S = [[f32(h0[((b_ * H + h) * K + i) * V + j]) for j in range(V)] for i in range(K)]
        dq = {}
        for t in range(T):  # forward sweep: h_t and dq_t
            for i in range(K):
                e = f32(math.exp(gate(b_, t, h, i)))
                for j in range(V):
                    S[i][j] = f32(f32(S[i][j] * e) + f32(x(k, b_, t, h, i, K) * x(v, b_, t, h, j, V)))
            for i in range(K):
                acc = 0.0
                for j in range(V): acc = f32(acc + f32(S[i][j] * x(do, b_, t, h, j, V)))
                dq[t, i] = f32(acc * scale)
        dS = [[f32(dht[((b_ * H + h) * K + i) * V + j]) for j in range(V)] for i in range(K)]
        run = []
        for i in range(K):
            acc = 0.0
            for j in range(V): acc = f32(acc + f32(S[i][j] * dS[i][j]))
            run.append(acc)
        if scalar:  # b_dg = tl.sum(b_h * b_dh): one scalar
            tot = 0.0
            for a in run: tot = f32(tot + a)
            run = tot
        for t in reversed(range(T)):  # reverse sweep: dk_t, then the running dg
            for i in range(K):
                for j in range(V):
                    dS[i][j] = f32(dS[i][j] + f32(f32(x(q, b_, t, h, i, K) * scale) * x(do, b_, t, h, j, V)))
            term = 0.0
            for i in range(K):
                dk = 0.0
                for j in range(V): dk = f32(dk + f32(dS[i][j] * x(v, b_, t, h, j, V)))
                d = f32(f32(x(q, b_, t, h, i, K) * dq[t, i]) - f32(x(k, b_, t, h, i, K) * dk))
                if scalar:
                    term = f32(term + d)
                else:
                    run[i] = f32(run[i] + d)
                    dg[((b_ * T + t) * H + h) * K + i] = run[i]
            if scalar:  # b_dg += tl.sum(b_q * b_dq - b_k * b_dk)
                run = f32(run + term)
                dg[(b_ * T + t) * H + h] = run
            for i in range(K):
                e = f32(math.exp(gate(b_, t, h, i)))
                for j in range(V): dS[i][j] = f32(dS[i][j] * e)
cand = {n: (shape, [f32(a) for a in vals]) for n, (shape, vals) in orc.items()}
cand['dg'] = (inp['g'][0], dg)
write(sys.argv[3], cand, {})
ref = orc['dg'][1]
W = 1 if scalar else K
print('dg at t=0: replay', [dg[h * W + i] for h in range(H) for i in range(W)],
      'oracle', [ref[h * W + i] for h in range(H) for i in range(W)])
print('max |dg - oracle| %.3g' % max(abs(a - b) for a, b in zip(dg, ref)))

// SPDX-License-Identifier: Apache-2.0
// kv_cache.cl: the two decoder steps around a KV cache [2, Hk, S, D] (keys, then values), whose
// write position and visible length come from a device positions tensor, so that one recorded
// graph serves every decode step.
// - qkv_rope_cache: one work-group per (head, token) of a fused qkv row [Hq + 2 Hk heads of D]:
//   optional RMSNorm of q and k heads (q_norm / k_norm weights), RoPE of the first ROT dims,
//   then q to `query` [T, Hq, D] and k, v to the cache at the token's position.
// - kv_cache_attention: one work-group per (query head, token); the token sees cache positions
//   0 .. positions[t] (causal by position); keys in chunks of WG with an online softmax.
// - decode_attention: both for one token, one work-group per query head: each group normalizes
//   and rotates its q head and its kv head's new key itself (so no group waits for another), the
//   first q head of each kv group writes the new k/v to the cache, and the new position's key
//   and value are taken from local memory, rounded to the cache's storage type as a reader of
//   the cache would see them.
// Defines: A_K (qkv / query / output kind), K_K (cache kind), W_K (norm weight kind), C_K
// (cos/sin kind), P_K (positions kind), D, ROT, WG (power of two), NEOX, HAS_QN, HAS_KN,
// ACC_N (ceil(D / WG)), KROW16 (0/1: cache rows 16-byte aligned, read 16 bytes per load), ROWS
// (decode_attention's variant 1 for CPUs: decode_attention_rows, one work-item per query head),
// GROUPED (variant 2 for GPUs: decode_attention_grouped, one work-group per kv head serving its
// GROUPED query heads; 0 otherwise), LANES (variant 3 for GPUs: decode_attention_lanes, flash
// decoding for blocks of GROUPED query heads, with KU rows in flight a warp, SCRATCH floats of
// local scratch, LANE_SHFL 1 where inline-PTX warp shuffles build, HALF_ROWS 1 for two 16-bit
// rows a warp and RA 1 for the first pass's rows loaded ahead in chunks of several passes).
// decode_attention_lanes' grid has get_num_groups(1) splits along the keys: one per CHUNK keys
// of the cache's capacity, or fewer (the host's sp), each then taking a run of consecutive chunks
// that it merges online, so that a long visible length is read by a few groups that each keep
// their next chunk's rows in flight instead of by one short-lived group a chunk.

#if defined(QKV_ROPE_CACHE) || defined(DECODE_ATTENTION)
// RoPE of dim i < ROT of a head row: it mixes the row's dims rope_first(i) and rope_second(i)
// (NeoX: i and i + ROT/2 of the halves; GPT-J: the neighbours 2j, 2j + 1) by the cos/sin row c.
// Both address spaces' rows (local in head_norm_rope, private in the CPU variant) index the same.
inline int rope_pair(int i) { return NEOX ? (i < ROT / 2 ? i : i - ROT / 2) : i / 2; }
inline int rope_first(int i) { return NEOX ? rope_pair(i) : 2 * rope_pair(i); }
inline int rope_second(int i) { return NEOX ? rope_pair(i) + ROT / 2 : 2 * rope_pair(i) + 1; }
inline float rope_apply(int i, float x1, float x2, float cc, float sn) {
  const bool first = NEOX ? i < ROT / 2 : (i & 1) == 0;
  return first ? x1 * cc - x2 * sn : x2 * cc + x1 * sn;
}
inline float rope_dim(int i, float x1, float x2, __global const STYPE(C_K)* c) {
  const int j = rope_pair(i);
  return rope_apply(i, x1, x2, LOAD(C_K, c, j), LOAD(C_K, c, ROT / 2 + j));
}

// One head row of D values -> optional RMSNorm (weight wt) -> RoPE of the first ROT dims by the
// cos/sin row c (when rotate) -> dst (local). Uses row and part; ends with a barrier.
void head_norm_rope(__global const STYPE(A_K)* src, __global const STYPE(W_K)* wt, bool norm, float eps,
                    __global const STYPE(C_K)* c, bool rotate, __local float* row, __local float* part,
                    __local float* dst) {
  const int lid = get_local_id(0);
  float ss = 0;
  for (int i = lid; i < D; i += WG) {
    const float v = LOAD(A_K, src, i);
    row[i] = v;
    ss += v * v;
  }
  if (norm) {  // uniform over the work-group
    part[lid] = ss;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int w = WG / 2; w > 0; w >>= 1) {
      if (lid < w) part[lid] += part[lid + w];
      barrier(CLK_LOCAL_MEM_FENCE);
    }
    const float r = rsqrt(part[0] / (float)D + eps);
    for (int i = lid; i < D; i += WG) row[i] = row[i] * r * LOAD(W_K, wt, i);
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int i = lid; i < D; i += WG)
    dst[i] = rotate && i < ROT ? rope_dim(i, row[rope_first(i)], row[rope_second(i)], c) : row[i];
  barrier(CLK_LOCAL_MEM_FENCE);
}

// head_norm_rope's reduction scratch, declared only where a norm uses it: a __local array that a
// kernel declares and never uses aborts PoCL 5.0's compiler (pocl::isAutomaticLocal's assertion).
#if HAS_QN || HAS_KN
#define NORM_SCRATCH(name) __local float name[WG]
#else
#define NORM_SCRATCH(name) __local float* name = 0
#endif
#endif

#ifdef QKV_ROPE_CACHE
__kernel void qkv_rope_cache(long hq, long hk, long S, long max_pos, __global const STYPE(A_K)* qkv,
                             long qkv_off, long qkv_st, __global const STYPE(P_K)* pos, long p_off,
                             __global const STYPE(C_K)* cs, long c_off, __global STYPE(A_K)* qout, long q_off,
                             __global STYPE(K_K)* cache, long cache_off, __global const STYPE(W_K)* qn, long qn_off,
                             __global const STYPE(W_K)* kn, long kn_off, float eps) {
  __local float row[D], res[D];
  NORM_SCRATCH(part);
  const int lid = get_local_id(0);
  const long h = get_group_id(0), t = get_group_id(1);
  const bool is_q = h < hq;
  const long p = LOADL(P_K, pos, p_off + t);
  const bool rotate = p >= 0 && p < max_pos;
  head_norm_rope(qkv + qkv_off + t * qkv_st + h * D, is_q ? qn + qn_off : kn + kn_off, is_q ? HAS_QN : HAS_KN,
                 eps, cs + c_off + (rotate ? p : 0) * ROT, rotate, row, part, res);
  if (is_q) {
    __global STYPE(A_K)* qdst = qout + q_off + (t * hq + h) * D;
    for (int i = lid; i < D; i += WG) STORE(A_K, qdst, i, res[i]);
    return;
  }
  if (p < 0 || p >= S) return;
  const long kh = h - hq;
  __global STYPE(K_K)* kdst = cache + cache_off + (kh * S + p) * D;
  for (int i = lid; i < D; i += WG) STORE(K_K, kdst, i, res[i]);
  // The k work-group of a kv head also moves its v row.
  __global const STYPE(A_K)* vsrc = qkv + qkv_off + t * qkv_st + (hq + hk + kh) * D;
  __global STYPE(K_K)* vdst = cache + cache_off + ((hk + kh) * S + p) * D;
  for (int i = lid; i < D; i += WG) STORE(K_K, vdst, i, LOAD(A_K, vsrc, i));
}
#endif

#if defined(KV_CACHE_ATTENTION) || defined(DECODE_ATTENTION)
#ifndef KROW16
#define KROW16 0
#endif
#if KROW16
// KROW16 (cache rows 16-byte aligned): a key row is read 16 bytes per load, KV_N values (4 f32,
// 8 f16/bf16), instead of one scalar load per element; q . k of such a piece, in f32.
inline float kdot16_f32(__local const float* q, __global const float* k) {
  const float4 v = *(__global const float4*)k;
  return q[0] * v.s0 + q[1] * v.s1 + q[2] * v.s2 + q[3] * v.s3;
}
inline float kdot16_bf16(__local const float* q, __global const ushort* k) {
  const float8 v = prism_bf16x8(*(__global const uint4*)k);
  return q[0] * v.s0 + q[1] * v.s1 + q[2] * v.s2 + q[3] * v.s3 + q[4] * v.s4 + q[5] * v.s5 + q[6] * v.s6 +
         q[7] * v.s7;
}
inline float kdot16_f16(__local const float* q, __global const half* k) {
  const float8 v = vload_half8(0, k);
  return q[0] * v.s0 + q[1] * v.s1 + q[2] * v.s2 + q[3] * v.s3 + q[4] * v.s4 + q[5] * v.s5 + q[6] * v.s6 +
         q[7] * v.s7;
}
#define kv_n_f32 4
#define kv_n_f16 8
#define kv_n_bf16 8
#define KV_N PRISM_XCAT(kv_n_, K_K)
#define KDOT16(q, k) PRISM_XCAT(kdot16_, K_K)(q, k)
#endif
// The online softmax of both attention kernels over cache keys [kb, ke): qs holds the scaled
// query; in chunks of WG keys each work-item scores one key, the group reduces max and sum, and
// item d accumulates output dim d. Position p (decode_attention's new token; -1: none) takes its
// key and value from kr / vr in local memory instead of the cache. Ends with a barrier.
void attend_keys(__local const float* qs, __global const STYPE(K_K)* K, __global const STYPE(K_K)* V, long kb,
                 long ke, long p, __local const float* kr, __local const float* vr, __local float* ps,
                 __local float* red, float* m_io, float* l_io, float* acc) {
  const int lid = get_local_id(0);
  float m = *m_io, l = *l_io;
  for (long j0 = kb; j0 < ke; j0 += WG) {
    const long j = j0 + lid;
    float s = -INFINITY;
    if (j < ke) {
      float d0 = 0, d1 = 0, d2 = 0, d3 = 0;
      int d = 0;
      if (j == p) {
        for (; d + 4 <= D; d += 4) {
          d0 += qs[d] * kr[d];
          d1 += qs[d + 1] * kr[d + 1];
          d2 += qs[d + 2] * kr[d + 2];
          d3 += qs[d + 3] * kr[d + 3];
        }
        for (; d < D; ++d) d0 += qs[d] * kr[d];
      } else {
        __global const STYPE(K_K)* k = K + j * D;
#if KROW16
        for (; d + 4 * KV_N <= D; d += 4 * KV_N) {
          d0 += KDOT16(qs + d, k + d);
          d1 += KDOT16(qs + d + KV_N, k + d + KV_N);
          d2 += KDOT16(qs + d + 2 * KV_N, k + d + 2 * KV_N);
          d3 += KDOT16(qs + d + 3 * KV_N, k + d + 3 * KV_N);
        }
#endif
        for (; d + 4 <= D; d += 4) {
          d0 += qs[d] * LOAD(K_K, k, d);
          d1 += qs[d + 1] * LOAD(K_K, k, d + 1);
          d2 += qs[d + 2] * LOAD(K_K, k, d + 2);
          d3 += qs[d + 3] * LOAD(K_K, k, d + 3);
        }
        for (; d < D; ++d) d0 += qs[d] * LOAD(K_K, k, d);
      }
      s = (d0 + d1) + (d2 + d3);
    }
    red[lid] = s;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int w = WG / 2; w > 0; w >>= 1) {
      if (lid < w) red[lid] = fmax(red[lid], red[lid + w]);
      barrier(CLK_LOCAL_MEM_FENCE);
    }
    const float mnew = fmax(m, red[0]);
    barrier(CLK_LOCAL_MEM_FENCE);
    const float e = j < ke ? exp(s - mnew) : 0.0f;
    ps[lid] = e;
    red[lid] = e;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int w = WG / 2; w > 0; w >>= 1) {
      if (lid < w) red[lid] += red[lid + w];
      barrier(CLK_LOCAL_MEM_FENCE);
    }
    const float alpha = exp(m - mnew);
    l = l * alpha + red[0];
    const int cnt = (int)min((long)WG, ke - j0);
    for (int a = 0; a < ACC_N; ++a) {
      const int d = lid + a * WG;
      if (d < D) {  // four independent sums keep four value loads in flight
#define VAL(jv) ((jv) == p ? vr[d] : LOAD(K_K, V + (jv) * D, d))
        float x0 = acc[a] * alpha, x1 = 0, x2 = 0, x3 = 0;
        int jj = 0;
        for (; jj + 4 <= cnt; jj += 4) {
          const long jv = j0 + jj;
          x0 += ps[jj] * VAL(jv);
          x1 += ps[jj + 1] * VAL(jv + 1);
          x2 += ps[jj + 2] * VAL(jv + 2);
          x3 += ps[jj + 3] * VAL(jv + 3);
        }
        for (; jj < cnt; ++jj) x0 += ps[jj] * VAL(j0 + jj);
#undef VAL
        acc[a] = (x0 + x1) + (x2 + x3);
      }
    }
    m = mnew;
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  *m_io = m;
  *l_io = l;
}

// One head's whole output row o = acc / l (item d holds acc[a] for d = lid + a WG); zeros when no
// key is visible.
void store_normalized(__global STYPE(A_K)* o, const float* acc, float l, long L) {
  const int lid = get_local_id(0);
  const float inv = L > 0 ? 1.0f / l : 0.0f;
  for (int a = 0; a < ACC_N; ++a) {
    const int d = lid + a * WG;
    if (d < D) STORE(A_K, o, d, acc[a] * inv);
  }
}
#endif

#ifdef KV_CACHE_ATTENTION
__kernel void kv_cache_attention(long hq, long hk, long S, float scale, __global const STYPE(A_K)* qp, long q_off,
                                 long q_st, long q_sh, __global const STYPE(K_K)* cache, long c_off,
                                 __global const STYPE(P_K)* pos, long p_off, __global STYPE(A_K)* out,
                                 long o_off) {
  __local float qs[D];
  __local float ps[WG];
  __local float red[WG];
  const int lid = get_local_id(0);
  const long h = get_group_id(0), t = get_group_id(1);
  const long kvh = h / (hq / hk);
  for (int i = lid; i < D; i += WG) qs[i] = LOAD(A_K, qp, q_off + t * q_st + h * q_sh + i) * scale;
  const long p = LOADL(P_K, pos, p_off + t);
  const long L = p < 0 ? 0 : min(p + 1, S);
  __global const STYPE(K_K)* K = cache + c_off + kvh * S * D;
  __global const STYPE(K_K)* V = cache + c_off + (hk + kvh) * S * D;
  float m = -INFINITY, l = 0;
  float acc[ACC_N];
  for (int a = 0; a < ACC_N; ++a) acc[a] = 0;
  barrier(CLK_LOCAL_MEM_FENCE);
  attend_keys(qs, K, V, 0, L, -1, qs, qs, ps, red, &m, &l, acc);
  store_normalized(out + o_off + (t * hq + h) * D, acc, l, L);
}
#endif

#ifdef DECODE_ATTENTION
// A value as a store to, then a load from, storage of kind K would give it.
inline float round_f32(float v) { return v; }
inline float round_bf16(float v) { return bf16_to_f(f_to_bf16(v)); }
inline float round_f16(float v) {
  ushort bits;
  vstore_half_rte(v, 0, (__private half*)&bits);
  return vload_half(0, (__private const half*)&bits);
}
#define ROUND(K, v) PRISM_XCAT(round_, K)(v)
// Dim i of the new token, its value row's dim being v: the writer stores k and v at position p;
// every item keeps them, and its nq scaled query rows (qs[g D + i]), rounded as a reader of the
// cache would see them. Every variant uses it (through NEW_KV_ROWS, or with v loaded early), on
// private (variant 1) or local (variants 0, 2 and 3) kr, vr and qs.
#define NEW_KV_ROW(i, v, nq)                                                       \
  {                                                                                \
    if (writer) {                                                                  \
      STORE(K_K, K + p * D, (i), kr[i]);                                           \
      STORE(K_K, V + p * D, (i), (v));                                             \
    }                                                                              \
    kr[i] = ROUND(K_K, kr[i]);                                                     \
    vr[i] = ROUND(K_K, (v));                                                       \
    for (int g_ = 0; g_ < (nq); ++g_)                                              \
      qs[g_ * D + (i)] = ROUND(A_K, qs[g_ * D + (i)]) * scale; /* as a stored query */ \
  }
// Dims first, first + step, ... of the new token, each value loaded as it is stored.
#define NEW_KV_ROWS(first, step, nq)                  \
  for (int i = (first); i < D; i += (step)) {         \
    const float v_ = LOAD(A_K, vsrc, i);              \
    NEW_KV_ROW(i, v_, nq)                             \
  }
// Four consecutive values of kind K as a float4.
inline float4 load4_f32(__global const float* p, long i) { return vload4(0, p + i); }
inline float4 load4_f16(__global const half* p, long i) { return vload_half4(0, p + i); }
inline float4 load4_bf16(__global const ushort* p, long i) {
  return as_float4(convert_uint4(vload4(0, p + i)) << 16);
}
#define LOAD4(K, p, i) PRISM_XCAT(load4_, K)(p, i)

#if ROWS
// Variant 1 (CPUs): one work-item per query head and no barriers. The item normalizes and
// rotates its q head and its kv head's new key in private memory (the first q head of each kv
// group also writes the new k/v to the cache), then walks the keys 0 .. position in order with
// an online softmax that rescales only when the running max grows. PoCL runs each item's loops
// as plain vector code, where variant 0's per-chunk barriers and tree reductions each become a
// pass over the group's items.
void head_norm_rope_private(__global const STYPE(A_K)* src, __global const STYPE(W_K)* wt, bool norm,
                            float eps, __global const STYPE(C_K)* c, bool rotate, float* dst) {
  float row[D];
  float ss = 0;
  for (int i = 0; i < D; ++i) {
    row[i] = LOAD(A_K, src, i);
    ss += row[i] * row[i];
  }
  if (norm) {
    const float r = rsqrt(ss / (float)D + eps);
    for (int i = 0; i < D; ++i) row[i] = row[i] * r * LOAD(W_K, wt, i);
  }
  for (int i = 0; i < D; ++i)
    dst[i] = rotate && i < ROT ? rope_dim(i, row[rope_first(i)], row[rope_second(i)], c) : row[i];
}

__kernel void decode_attention_rows(long hq, long hk, long S, long max_pos, float scale, float eps,
                                    __global const STYPE(A_K)* qkv, long qkv_off, __global const STYPE(P_K)* pos,
                                    long p_off, __global const STYPE(C_K)* cs, long c_off,
                                    __global STYPE(K_K)* cache, long cache_off, __global const STYPE(W_K)* qn,
                                    long qn_off, __global const STYPE(W_K)* kn, long kn_off,
                                    __global STYPE(A_K)* out, long o_off) {
  const long h = get_global_id(0);
  if (h >= hq) return;
  const long group = hq / hk, kvh = h / group;
  const long p = LOADL(P_K, pos, p_off);
  const long L = p < 0 ? 0 : min(p + 1, S);
  const bool rotate = p >= 0 && p < max_pos;
  __global const STYPE(C_K)* c = cs + c_off + (rotate ? p : 0) * ROT;
  float qs[D], kr[D], vr[D], acc[D];
  head_norm_rope_private(qkv + qkv_off + h * D, qn + qn_off, HAS_QN, eps, c, rotate, qs);
  head_norm_rope_private(qkv + qkv_off + (hq + kvh) * D, kn + kn_off, HAS_KN, eps, c, rotate, kr);
  __global const STYPE(A_K)* vsrc = qkv + qkv_off + (hq + hk + kvh) * D;
  const bool writer = h % group == 0 && p >= 0 && p < S;
  __global STYPE(K_K)* K = cache + cache_off + kvh * S * D;
  __global STYPE(K_K)* V = cache + cache_off + (hk + kvh) * S * D;
  NEW_KV_ROWS(0, 1, 1);
  float m = -INFINITY, l = 0;
#if D % 8 == 0
#define RKB 4
  // Four dims per vector: the key's dot product and the value's update are D / 4 vector FMAs.
  float4 q4[D / 4], a4[D / 4], kr4[D / 4], vr4[D / 4];
  for (int i = 0; i < D / 4; ++i) {
    q4[i] = vload4(i, qs);
    kr4[i] = vload4(i, kr);
    vr4[i] = vload4(i, vr);
    a4[i] = (float4)(0.0f);
  }
  // Keys in blocks of RKB: their dot products are independent chains (one key at a time was a
  // chain of D / 4 dependent FMAs, a compare and an exp per key, latency-bound), the running max
  // moves once a block, and the value update takes the block's rows together.
  for (long j0 = 0; j0 < L; j0 += RKB) {
    float sc[RKB];
    for (int u = 0; u < RKB; ++u) {
      const long j = j0 + u;
      // The new position's key comes from private memory: another item may be writing it to the
      // cache right now.
      __global const STYPE(K_K)* kj = K + (j < L ? j : 0) * D;
      float4 s4 = (float4)(0.0f), t4 = (float4)(0.0f);
      if (j == p) {
        for (int i = 0; i < D / 4; i += 2) {
          s4 = fma(q4[i], kr4[i], s4);
          t4 = fma(q4[i + 1], kr4[i + 1], t4);
        }
      } else {
        for (int i = 0; i < D / 4; i += 2) {
          s4 = fma(q4[i], LOAD4(K_K, kj, 4 * i), s4);
          t4 = fma(q4[i + 1], LOAD4(K_K, kj, 4 * i + 4), t4);
        }
      }
      s4 += t4;
      sc[u] = j < L ? (s4.s0 + s4.s1) + (s4.s2 + s4.s3) : -INFINITY;
    }
    float bm = sc[0];
    for (int u = 1; u < RKB; ++u) bm = fmax(bm, sc[u]);
    if (bm > m) {  // a new max: rescale what was summed so far (exp(-inf) = 0 the first time)
      const float alpha = exp(m - bm);
      l *= alpha;
      for (int i = 0; i < D / 4; ++i) a4[i] *= alpha;
      m = bm;
    }
    for (int u = 0; u < RKB; ++u) {
      const long j = j0 + u;
      const float e = exp(sc[u] - m);  // 0 past the length (-inf)
      l += e;
      if (j == p)
        for (int i = 0; i < D / 4; ++i) a4[i] = fma((float4)(e), vr4[i], a4[i]);
      else if (j < L)
        for (int i = 0; i < D / 4; ++i) a4[i] = fma((float4)(e), LOAD4(K_K, V + j * D, 4 * i), a4[i]);
    }
  }
  for (int i = 0; i < D / 4; ++i) vstore4(a4[i], i, acc);
#else
  for (int i = 0; i < D; ++i) acc[i] = 0;
  for (long j = 0; j < L; ++j) {
    const bool fresh = j == p;  // see above
    __global const STYPE(K_K)* kj = K + j * D;
    __global const STYPE(K_K)* vj = V + j * D;
    float s = 0;
    for (int d = 0; d < D; ++d) s += qs[d] * (fresh ? kr[d] : LOAD(K_K, kj, d));
    if (s > m) {
      const float alpha = exp(m - s);
      l *= alpha;
      for (int i = 0; i < D; ++i) acc[i] *= alpha;
      m = s;
    }
    const float e = exp(s - m);
    l += e;
    for (int i = 0; i < D; ++i) acc[i] += e * (fresh ? vr[i] : LOAD(K_K, vj, i));
  }
#endif
  __global STYPE(A_K)* o = out + o_off + h * D;
  const float inv = L > 0 ? 1.0f / l : 0.0f;
  for (int i = 0; i < D; ++i) STORE(A_K, o, i, acc[i] * inv);
}
#else
#if SPLIT
// One group's partial for one query head: its D unnormalized sums (item d holds acc[a] for
// d = lid + a WG), the running max and the sum of exponentials, at `mine` (D + 2 floats).
void store_partial(__global float* mine, const float* acc, float m, float l) {
  const int lid = get_local_id(0);
  for (int a = 0; a < ACC_N; ++a) {
    const int d = lid + a * WG;
    if (d < D) mine[d] = acc[a];
  }
  if (lid == 0) {
    mine[D] = m;
    mine[D + 1] = l;
  }
}
#include "split_arrival.cl"  // last_split
// The last group of a head combines its `used` partials (split t at all + t (D + 2); only the
// splits below the visible length hold keys; volatile loads are L2 round trips) into row o.
void combine_splits(volatile __global const float* all, long used, __global STYPE(A_K)* o) {
  const int lid = get_local_id(0);
  float mx = -INFINITY;
  for (long t = 0; t < used; ++t) mx = fmax(mx, all[t * (D + 2) + D]);
  float sum = 0;
  for (long t = 0; t < used; ++t) {
    const float mt = all[t * (D + 2) + D];
    sum += mt == -INFINITY ? 0.0f : all[t * (D + 2) + D + 1] * exp(mt - mx);
  }
  for (int d = lid; d < D; d += WG) {
    float x = 0;
    for (long t = 0; t < used; ++t) {
      const float mt = all[t * (D + 2) + D];
      if (mt != -INFINITY) x += all[t * (D + 2) + d] * exp(mt - mx);
    }
    STORE(A_K, o, d, sum > 0 ? x / sum : 0.0f);
  }
}
#endif

#if LANES
// Variant 3 (GPUs): flash decoding. Work-group (b, s) serves G query heads of one kv head (block b
// of the kv head's GQ = hq / hk heads: G divides GQ, G <= 8; kv head b / (GQ / G)) over keys
// [s * CHUNK, (s + 1) * CHUNK), always split. Its WG items are NW = WG / 32 warps of 32 lanes;
// lane i holds dims [i DL, (i + 1) DL) of a row (DL = ceil(D / 32); dims past D read as 0), so a
// warp reads one key or value row with one coalesced load per lane:
// 1. scores: warp w scores keys w, w + NW, ... of the chunk, KU rows in flight; each lane's partial
//    dot products are summed across the warp (shfl.sync.bfly through inline PTX where the driver
//    builds it, LANE_SHFL=1; a local-memory pass elsewhere) into scr (G rows of CHUNK);
// 2. the chunk's softmax: warp w takes heads w, w + NW, ...: max, exponentials (in place), sum;
// 3. values: warp w sweeps the same keys as in 1, accumulating G rows of DL dims per lane; the
//    warps' sums meet in local memory (the scratch that held the scores);
// then the chunk's partials (D sums, max, sum per head) go to `part`, and the last group of the
// block combines them, each warp a head and each lane its DL dims.
#define G GROUPED
#define NW (WG / 32)
#define DL ((D + 31) / 32)
#define IN_ROW(lane, i) ((lane) * DL + (i) < D)  // dim i of a lane's slice is inside the row
#if LANE_SHFL
#include "lane_shfl.cl"  // lane_xor
#endif
// The sum (is_max false) or max of x over the caller's run of n (32 or 16) aligned lanes, in every
// lane of it. All WG items call it together (the local-memory pass has barriers), each with its x.
inline float lanes_reduce(float x, __local float* red, bool is_max, int n) {
#if LANE_SHFL
  for (int o = n / 2; o > 0; o >>= 1) {
    const float y = lane_xor(x, o);
    x = is_max ? fmax(x, y) : x + y;
  }
  return x;
#else
  const int lid = get_local_id(0), base = lid & ~(n - 1);
  barrier(CLK_LOCAL_MEM_FENCE);
  red[lid] = x;
  barrier(CLK_LOCAL_MEM_FENCE);
  float s = red[base];
  for (int i = 1; i < n; ++i) s = is_max ? fmax(s, red[base + i]) : s + red[base + i];
  return s;
#endif
}
#define lanes_sum(x, red) lanes_reduce(x, red, false, 32)
#define lanes_max(x, red) lanes_reduce(x, red, true, 32)
inline float4 lane4_f32(__global const float* p) { return *(__global const float4*)p; }
inline float4 lane4_f16(__global const half* p) { return vload_half4(0, p); }
inline float4 lane4_bf16(__global const ushort* p) {
  const uint2 u = *(__global const uint2*)p;  // little-endian: element 2i is the low half
  return (float4)(as_float(u.s0 << 16), as_float(u.s0 & 0xffff0000u), as_float(u.s1 << 16),
                  as_float(u.s1 & 0xffff0000u));
}
#define LANE4(p) PRISM_XCAT(lane4_, K_K)(p)
// Dims [lane DL, (lane + 1) DL) of cache row r: one 16- or 8-byte load where the rows are 16-byte
// aligned (KROW16) and D = 128, element loads otherwise.
inline void lane_row(__global const STYPE(K_K)* r, int lane, float* x) {
#if KROW16 && D == 128
  const float4 v = LANE4(r + lane * 4);
  x[0] = v.s0;
  x[1] = v.s1;
  x[2] = v.s2;
  x[3] = v.s3;
#else
  for (int i = 0; i < DL; ++i) x[i] = IN_ROW(lane, i) ? LOAD(K_K, r, lane * DL + i) : 0.0f;
#endif
}
// HALF_ROWS (host: 16-bit caches with KROW16 and D = 128): a cache row is 256 bytes, which half a
// warp reads with one 16-byte load a lane. The score and value passes then take two rows a warp at
// a time, lane i holding dims [8 (i % 16), 8 (i % 16) + 8) of row 2k + i / 16 (RL rows a warp, DV
// dims a lane, LS lanes a row), so each load moves 16 bytes and each score is summed over 16
// lanes: half the loads and shuffles a key of the 8-byte form.
#ifndef HALF_ROWS
#define HALF_ROWS 0
#endif
#if HALF_ROWS
#define RL 2
#define DV 8
#define LS 16
typedef uint4 lane_raw_t;  // 8 16-bit values, as loaded
inline float8 lane_raw8_bf16(uint4 u) { return prism_bf16x8(u); }
inline float8 lane_raw8_f16(uint4 u) { return vload_half8(0, (const __private half*)&u); }
// The 8 values of u as floats into x[0 .. 8).
#define LANE_RAW_FLOATS(u, x) vstore8(PRISM_XCAT(lane_raw8_, K_K)(u), 0, x)
// Dims [8 slot, 8 slot + 8) of cache row r, as loaded.
inline lane_raw_t lane_raw(__global const STYPE(K_K)* r, int slot) { return *(__global const uint4*)(r + slot * 8); }
#else
#define RL 1
#define DV DL
#define LS 32
#endif
// A split's partial row: D sums, then its max and sum, padded to PST = D + 4 floats so that rows
// stay 16-byte aligned. lane_part reads dims [lane DL, (lane + 1) DL) of one (volatile: written
// by other groups).
#define PST (D + 4)
#define TT (SCRATCH / NW)  // split weights a warp holds in the combine (>= 32 G)
#define KR (64 / DL)       // partial rows in flight in the combine
inline void lane_part(volatile __global const float* r, int lane, float* x) {
#if D == 128
  const float4 v = *(volatile __global const float4*)(r + lane * 4);
  x[0] = v.s0;
  x[1] = v.s1;
  x[2] = v.s2;
  x[3] = v.s3;
#else
  for (int i = 0; i < DL; ++i) x[i] = IN_ROW(lane, i) ? r[lane * DL + i] : 0.0f;
#endif
}
// PF: each warp holds its rows of the loops' first pass in registers, loaded as soon as the
// position is known, ahead of the norms, RoPE and the new row's write, so that the cache's DRAM
// latency overlaps them instead of following them; a split of several chunks loads the next
// chunk's first-pass keys and values (the values into vn, the current chunk's still in vx) once
// its scores are taken, so that they arrive during the softmax and the value pass. Always where
// the chunk is one pass (CHUNK <= NW KU RL); for longer chunks where the host asks (RA=1): the
// later passes load in their loops.
#ifndef RA
#define RA 0
#endif
#if CHUNK <= (WG / 32) * KU * RL || RA
#define PF 1
#else
#define PF 0
#endif
// Rows a warp takes per pass: KU, or fewer where the chunk is shorter than a pass, so that no
// iteration reduces scores of keys past the chunk (16-bit rows two a warp halve what a pass needs).
#if CHUNK < (WG / 32) * KU * RL
#define KP ((CHUNK + (WG / 32) * RL - 1) / ((WG / 32) * RL))
#else
#define KP KU
#endif
#define CR 8                                  // splits whose partial rows the combine holds at once
// The local-memory lane sums' scratch: a value an item, G of them in the score pass (no shuffles).
#if LANE_SHFL
#define LANES_RED WG
#else
#define LANES_RED (G * WG)
#endif
#if LANE_SHFL
// The score pass's KP G values a lane, padded to a power of two (NVP), and the scores each lane
// holds after they are reduce-scattered over a row's LS lanes (SCAT).
#define NVP (KP * G <= 1 ? 1 : KP * G <= 2 ? 2 : KP * G <= 4 ? 4 : KP * G <= 8 ? 8 : KP * G <= 16 ? 16 : KP * G <= 32 ? 32 : 64)
#define SCAT (NVP > LS ? NVP / LS : 1)
#define SCAT_DUP (NVP < LS ? LS / NVP : 1)  // lanes holding each sum where NVP < LS
// s[0 .. NVP) of each lane -> s[0 .. SCAT) = the sums over the row's LS lanes of values
// slot NVP / LS + r (every LS / NVP lanes hold the same sum where NVP < LS). Round m (a lane bit,
// LS / 2 down to 1) pairs the lane with the lane across bit m: while more than one value is left it
// keeps one half (NVP m / LS values), sends the other and adds; after that it sums its one value
// across bit m. Trip counts are constants, so s stays in registers.
#define SCAT_ROUND(m)                                                                                  \
  if ((m) < LS) {                                                                                      \
    const bool hi = (lane & (m)) != 0;                                                                 \
    if (NVP * 2 * (m) / LS >= 2) {                                                                     \
      for (int i = 0; i < NVP * (m) / LS; ++i) {                                                       \
        const float keep = hi ? s[i + NVP * (m) / LS] : s[i], send = hi ? s[i] : s[i + NVP * (m) / LS]; \
        s[i] = keep + lane_xor(send, (m));                                                             \
      }                                                                                                \
    } else {                                                                                           \
      s[0] += lane_xor(s[0], (m));                                                                     \
    }                                                                                                  \
  }
inline void lanes_sum_scatter(float* s, int lane) {
  SCAT_ROUND(16)
  SCAT_ROUND(8)
  SCAT_ROUND(4)
  SCAT_ROUND(2)
  SCAT_ROUND(1)
}
#undef SCAT_ROUND
#endif
// Key or value row u of a loop's pass into x (DV floats a lane; chunk key jl, cache row j): zeros
// past the chunk; the new position's row from local memory (nr: kr or vr; another group may be
// writing the cache); the first pass's row from the registers loaded ahead (ah: kx or vx, PF);
// else from the cache rows M (K or V).
#if PF && HALF_ROWS
#define PASS_ROW_AHEAD(ah, u, x) LANE_RAW_FLOATS(ah[u], x)
#elif PF
#define PASS_ROW_AHEAD(ah, u, x) \
  for (int i = 0; i < DL; ++i) x[i] = ah[u][i]
#else
#define PASS_ROW_AHEAD(ah, u, x)
#endif
#if HALF_ROWS
#define PASS_ROW_LOAD(M, j, x) LANE_RAW_FLOATS(lane_raw(M + (j) * D, slot), x)
#else
#define PASS_ROW_LOAD(M, j, x) lane_row(M + (j) * D, lane, x)
#endif
#define PASS_ROW(x, nr, ah, M, u, j0, jl, j)                                            \
  if ((jl) >= n) {                                                                     \
    for (int i = 0; i < DV; ++i) x[i] = 0;                                             \
  } else if ((j) == p) {                                                               \
    for (int i = 0; i < DV; ++i) x[i] = slot * DV + i < D ? nr[slot * DV + i] : 0.0f; \
  } else if (PF && (j0) == 0) {                                                        \
    PASS_ROW_AHEAD(ah, u, x);                                                          \
  } else {                                                                             \
    PASS_ROW_LOAD(M, j, x);                                                            \
  }
// The first-pass rows u of the chunk [kb, kb + n) of cache rows M into xa (kx or vx): zeros past
// the chunk and for the new position (its row comes from local memory).
#if HALF_ROWS
#define AHEAD_ROW(xa, M, u, j, on) xa[u] = (on) ? lane_raw(M + (j) * D, slot) : (uint4)(0)
#else
#define AHEAD_ROW(xa, M, u, j, on)                \
  if (on) {                                        \
    lane_row(M + (j) * D, lane, xa[u]);            \
  } else {                                         \
    for (int i = 0; i < DL; ++i) xa[u][i] = 0;     \
  }
#endif
#define LOAD_AHEAD(xa, M, kb, n)                                     \
  for (int u = 0; u < KP; ++u) {                                     \
    const int jl = (u * NW + w) * RL + hrow;                         \
    const long j = (kb) + jl;                                        \
    AHEAD_ROW(xa, M, u, j, jl < (n) && j != p);                      \
  }
#define RE (((G + 1) * D + WG - 1) / WG)  // RoPE entries an item computes
__kernel void decode_attention_lanes(long hq, long hk, long S, long max_pos, float scale, float eps,
                                     __global const STYPE(A_K)* qkv, long qkv_off, __global const STYPE(P_K)* pos,
                                     long p_off, __global const STYPE(C_K)* cs, long c_off,
                                     __global STYPE(K_K)* cache, long cache_off, __global const STYPE(W_K)* qn,
                                     long qn_off, __global const STYPE(W_K)* kn, long kn_off,
                                     __global STYPE(A_K)* out, long o_off, __global float* part,
                                     __global int* counters) {
  __local float qs[G * D], kr[D], vr[D], scr[SCRATCH], ml[3 * G], red[LANES_RED];
  __local int last_l;
  const int lid = get_local_id(0), lane = lid & 31, w = lid >> 5;
  // The lane's row of the warp's RL and its slot within it (HALF_ROWS; row 0 and the lane else).
  const int hrow = lane / LS, slot = lane % LS;
  // Block b: query heads qh0 .. qh0 + G - 1 of kv head kvh; its partials and counter are the block's.
  const long b = get_group_id(0), sidx = get_group_id(1), splits = get_num_groups(1);
  const long blocks = (hq / hk) / G, kvh = b / blocks, qh0 = kvh * (hq / hk) + (b - kvh * blocks) * G;
  const long p = LOADL(P_K, pos, p_off);
  const long L = p < 0 ? 0 : min(p + 1, S);
  // Visible chunks (one when no key is visible), chunks a split takes (one where the grid has a
  // split per chunk of the capacity) and splits that hold keys: the counter counts them alone,
  // and the splits past the visible length (most of the grid early in a sequence) do nothing.
  const long nch = max((L + CHUNK - 1) / CHUNK, 1L), cps = (nch + splits - 1) / splits;
  const long used = (nch + cps - 1) / cps;
  if (sidx < used) {
    const long c0 = sidx * cps, nc = min(cps, nch - c0);  // this split's chunks: c0 .. c0 + nc - 1
    long kb = min(c0 * CHUNK, L);
    int n = (int)(min(kb + CHUNK, L) - kb);
    __global STYPE(K_K)* K = cache + cache_off + kvh * S * D;
    __global STYPE(K_K)* V = cache + cache_off + (hk + kvh) * S * D;
#if PF
    // Key u of warp w is chunk key (u NW + w) RL + hrow in both loops; the new position's row comes
    // from local memory later (another group may be writing it).
#if HALF_ROWS
    lane_raw_t kx[KP], vx[KP], vn[KP];  // 4 registers a row, as loaded
#else
    float kx[KP][DL], vx[KP][DL], vn[KP][DL];
#endif
    LOAD_AHEAD(kx, K, kb, n)
    LOAD_AHEAD(vx, V, kb, n)
#endif
    const bool rotate = p >= 0 && p < max_pos;
    __global const STYPE(C_K)* c = cs + c_off + (rotate ? p : 0) * ROT;
    __global const STYPE(A_K)* vsrc = qkv + qkv_off + (hq + hk + kvh) * D;
    // What the passes below read from global memory, loaded up front as well: the cos/sin entries
    // of this item's RoPE outputs and its dims of the new value row.
    float rc[RE], rsn[RE], nv[ACC_N];
    for (int k = 0; k < RE; ++k) {
      const int e = lid + k * WG, i = e % D;
      const bool on = e < (G + 1) * D && rotate && i < ROT;
      rc[k] = on ? LOAD(C_K, c, rope_pair(i)) : 0.0f;
      rsn[k] = on ? LOAD(C_K, c, ROT / 2 + rope_pair(i)) : 0.0f;
    }
    for (int k = 0; k < ACC_N; ++k) nv[k] = lid + k * WG < D ? LOAD(A_K, vsrc, lid + k * WG) : 0.0f;
    // The G query rows and the key row (row G), normalized by warps (warp w: rows w, w + NW, ...;
    // lane sums of squares) into scr, then rotated by the whole group into qs and kr.
    for (int r0 = 0; r0 <= G; r0 += NW) {
      const int r = r0 + w;
      const bool on = r <= G, norm = r < G ? HAS_QN : HAS_KN;
      __global const STYPE(A_K)* src = qkv + qkv_off + (r < G ? qh0 + r : hq + kvh) * D;
      __global const STYPE(W_K)* wt = r < G ? qn + qn_off : kn + kn_off;
      float v[DL], nw[DL], ss = 0;
      for (int i = 0; i < DL; ++i) {
        v[i] = on && IN_ROW(lane, i) ? LOAD(A_K, src, lane * DL + i) : 0.0f;
        nw[i] = on && norm && IN_ROW(lane, i) ? LOAD(W_K, wt, lane * DL + i) : 0.0f;
        ss += v[i] * v[i];
      }
      ss = lanes_sum(ss, red);
      if (on) {
        const float rs = norm ? rsqrt(ss / (float)D + eps) : 1.0f;
        for (int i = 0; i < DL; ++i)
          if (IN_ROW(lane, i)) scr[r * D + lane * DL + i] = norm ? v[i] * rs * nw[i] : v[i];
      }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int k = 0; k < RE; ++k) {
      const int e = lid + k * WG;
      if (e < (G + 1) * D) {
        const int r = e / D, i = e - r * D;
        __local const float* x = scr + r * D;
        (r < G ? qs + r * D : kr)[i] =
            rotate && i < ROT ? rope_apply(i, x[rope_first(i)], x[rope_second(i)], rc[k], rsn[k]) : x[i];
      }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    const bool writer = sidx == 0 && qh0 == kvh * (hq / hk) && p >= 0 && p < S;  // the kv head's first block
    for (int k = 0; k < ACC_N; ++k) {
      const int i = lid + k * WG;
      if (i < D) NEW_KV_ROW(i, nv[k], G)
    }
    // The split's running max and sum per head (ml[g], ml[G + g]) over its chunks so far, and the
    // factor (ml[2 G + g]) by which a chunk's new max scales the sums before it.
    if (lid < G) {
      ml[lid] = -INFINITY;
      ml[G + lid] = 0;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    // The lane's dims of every query row: [slot DV, (slot + 1) DV).
    float q[G][DV];
    for (int g = 0; g < G; ++g)
      for (int i = 0; i < DV; ++i) q[g][i] = slot * DV + i < D ? qs[g * D + slot * DV + i] : 0.0f;
    float acc[G][DV];
    for (int g = 0; g < G; ++g)
      for (int i = 0; i < DV; ++i) acc[g][i] = 0;
    // The split's chunks, each as 1 to 3 below (trip counts are the group's: barriers).
    for (long c = 0; c < nc; ++c) {
      // 1. Scores. The loop's trip count is the group's (the local-memory lane sums have barriers).
      for (int j0 = 0; j0 < n; j0 += NW * KP * RL) {
        float x[KP][DV];
        for (int u = 0; u < KP; ++u) {
          const int jl = j0 + (u * NW + w) * RL + hrow;
          const long j = kb + jl;
          PASS_ROW(x[u], kr, kx, K, u, j0, jl, j)
        }
#if LANE_SHFL
        // The KP G partial dots (value e: key u = e / G, head g = e % G), reduce-scattered over the
        // row's LS lanes: NVP - 1 shuffles in log2(LS) independent rounds instead of a 5-deep chain
        // of shuffles for each value; the lane then stores the scores it holds.
        float s[NVP];
        for (int e = 0; e < NVP; ++e) {
          s[e] = 0;
          if (e < KP * G)
            for (int i = 0; i < DV; ++i) s[e] = fma(q[e % G][i], x[e / G][i], s[e]);
        }
        lanes_sum_scatter(s, lane);
        for (int r = 0; r < SCAT; ++r) {
          const int e = slot * NVP / LS + r, u = e / G, jl = j0 + (u * NW + w) * RL + hrow;
          if (e < KP * G && jl < n && slot % SCAT_DUP == 0) scr[(e % G) * CHUNK + jl] = s[r];
        }
#else
        // Without shuffles, a key's G partial dots go to local memory in one round and each row's
        // first lane sums its LS lanes' values in lanes_reduce's order (the same results): two
        // barriers a key instead of two a score (PoCL 3.1, 2 cores: 3.3x faster at G = 2, 5.1x at
        // G = 8).
        for (int u = 0; u < KP; ++u) {
          const int jl = j0 + (u * NW + w) * RL + hrow;
          barrier(CLK_LOCAL_MEM_FENCE);
          for (int g = 0; g < G; ++g) {
            float s = 0;
            for (int i = 0; i < DV; ++i) s = fma(q[g][i], x[u][i], s);
            red[g * WG + lid] = s;
          }
          barrier(CLK_LOCAL_MEM_FENCE);
          if (slot == 0 && jl < n)
            for (int g = 0; g < G; ++g) {
              float s = red[g * WG + lid];
              for (int i = 1; i < LS; ++i) s += red[g * WG + lid + i];
              scr[g * CHUNK + jl] = s;
            }
        }
#endif
      }
      // The next chunk's first-pass keys, now that this chunk's are used, and values (into vn: this
      // chunk's are still to be used).
      const long kb1 = min(kb + CHUNK, L);
      const int n1 = (int)(min(kb1 + CHUNK, L) - kb1);
#if PF
      if (c + 1 < nc) {
        LOAD_AHEAD(kx, K, kb1, n1)
        LOAD_AHEAD(vn, V, kb1, n1)
      }
#endif
      barrier(CLK_LOCAL_MEM_FENCE);
      // 2. The chunk's softmax per head, exponentials in place, against the split's running max.
      for (int g0 = 0; g0 < G; g0 += NW) {
        const int g = g0 + w;
        const float m0 = g < G ? ml[g] : 0.0f;
        float mx = -INFINITY;
        if (g < G)
          for (int i = lane; i < n; i += 32) mx = fmax(mx, scr[g * CHUNK + i]);
        mx = fmax(lanes_max(mx, red), m0);
        float sum = 0;
        if (g < G)
          for (int i = lane; i < n; i += 32) {
            const float e = exp(scr[g * CHUNK + i] - mx);
            scr[g * CHUNK + i] = e;
            sum += e;
          }
        sum = lanes_sum(sum, red);
        if (g < G && lane == 0) {
          const float a = m0 == -INFINITY ? 0.0f : exp(m0 - mx);
          ml[g] = mx;
          ml[G + g] = fma(ml[G + g], a, sum);
          ml[2 * G + g] = a;
        }
      }
      barrier(CLK_LOCAL_MEM_FENCE);
      // 3. Values (the same keys a lane as in 1), onto the earlier chunks' sums rescaled.
      for (int g = 0; g < G; ++g) {
        const float a = ml[2 * G + g];
        for (int i = 0; i < DV; ++i) acc[g][i] *= a;
      }
      for (int j0 = 0; j0 < n; j0 += NW * KP * RL) {
        float x[KP][DV], pr[KP][G];
        for (int u = 0; u < KP; ++u) {
          const int jl = j0 + (u * NW + w) * RL + hrow;
          const long j = kb + jl;
          for (int g = 0; g < G; ++g) pr[u][g] = jl < n ? scr[g * CHUNK + jl] : 0.0f;
          PASS_ROW(x[u], vr, vx, V, u, j0, jl, j)
        }
        for (int u = 0; u < KP; ++u)
          for (int g = 0; g < G; ++g)
            for (int i = 0; i < DV; ++i) acc[g][i] = fma(pr[u][g], x[u][i], acc[g][i]);
      }
      if (c + 1 < nc) {
#if PF
        for (int u = 0; u < KP; ++u)
#if HALF_ROWS
          vx[u] = vn[u];
#else
          for (int i = 0; i < DL; ++i) vx[u][i] = vn[u][i];
#endif
#endif
        kb = kb1;
        n = n1;
        barrier(CLK_LOCAL_MEM_FENCE);  // the probabilities read, before the next chunk's scores
      }
    }
    // Each warp's sums to its rows of scr; with HALF_ROWS the second half of the warp (the other
    // key of each pair, the same dims) adds its sums after the first half's.
    barrier(CLK_LOCAL_MEM_FENCE);  // every warp is done with the probabilities in scr
    for (int h = 0; h < RL; ++h) {
      if (hrow == h)
        for (int g = 0; g < G; ++g)
          for (int i = 0; i < DV; ++i) {
            __local float* o = scr + (w * G + g) * D + slot * DV + i;
            if (slot * DV + i < D) *o = h ? *o + acc[g][i] : acc[g][i];
          }
      barrier(CLK_LOCAL_MEM_FENCE);
    }
    for (int e = lid; e < G * D; e += WG) {
      const int g = e / D, d = e - g * D;
      float x = 0;
      for (int v = 0; v < NW; ++v) x += scr[(v * G + g) * D + d];
      part[((qh0 + g) * splits + sidx) * PST + d] = x;
    }
    if (lid < G) {
      part[((qh0 + lid) * splits + sidx) * PST + D] = ml[lid];  // -inf, 0 where no key is visible
      part[((qh0 + lid) * splits + sidx) * PST + D + 1] = ml[G + lid];
    }
    if (last_split(counters + b, used, &last_l)) {
      // The combine. Warp w takes heads w, w + NW, ... The loads are volatile (other groups'
      // partials, from L2). Up to CR splits: every lane reads each split's max and sum and its own
      // DL dims of each split's row, all in one round, and weighs them itself. More: its lanes read
      // the splits' maxima side by side, then weigh the splits into the warp's TT floats of scr (TT
      // at a time), then every lane adds the weighted rows over its DL dims, KR rows in flight.
      __local float* wts = scr + w * TT;
      for (int g0 = 0; g0 < G; g0 += NW) {
        const int g = g0 + w;
        const bool on = g < G;
        volatile __global const float* all = part + (qh0 + (on ? g : 0)) * splits * PST;
        float sum = 0, x[DL];
        for (int i = 0; i < DL; ++i) x[i] = 0;
        if (used <= CR) {
          float m[CR], l[CR], r[CR][DL], mx = -INFINITY;
          for (int t = 0; t < CR; ++t) {
            const bool in = on && t < used;
            m[t] = in ? all[t * PST + D] : -INFINITY;
            l[t] = in ? all[t * PST + D + 1] : 0.0f;
            if (in)
              lane_part(all + t * PST, lane, r[t]);
            else
              for (int i = 0; i < DL; ++i) r[t][i] = 0;
          }
          for (int t = 0; t < CR; ++t) mx = fmax(mx, m[t]);
          for (int t = 0; t < CR; ++t) {
            const float e = m[t] == -INFINITY ? 0.0f : exp(m[t] - mx);
            sum = fma(e, l[t], sum);
            for (int i = 0; i < DL; ++i) x[i] = fma(e, r[t][i], x[i]);
          }
        } else {
          float mx = -INFINITY;
          if (on)
            for (long t = lane; t < used; t += 32) mx = fmax(mx, all[t * PST + D]);
          mx = lanes_max(mx, red);
          for (long t0 = 0; t0 < used; t0 += TT) {
            const int cnt = (int)min((long)TT, used - t0);
            barrier(CLK_LOCAL_MEM_FENCE);  // scr: the scores' last readers, or the previous tile's
            if (on)
              for (int k = lane; k < cnt; k += 32) {
                const float mt = all[(t0 + k) * PST + D], lt = all[(t0 + k) * PST + D + 1];
                const float e = mt == -INFINITY ? 0.0f : exp(mt - mx);
                wts[k] = e;
                sum += e * lt;
              }
            barrier(CLK_LOCAL_MEM_FENCE);
            if (on) {
              int k = 0;
              for (; k + KR <= cnt; k += KR) {
                float r[KR][DL];
                for (int u = 0; u < KR; ++u) lane_part(all + (t0 + k + u) * PST, lane, r[u]);
                for (int u = 0; u < KR; ++u)
                  for (int i = 0; i < DL; ++i) x[i] = fma(wts[k + u], r[u][i], x[i]);
              }
              for (; k < cnt; ++k) {
                float r[DL];
                lane_part(all + (t0 + k) * PST, lane, r);
                for (int i = 0; i < DL; ++i) x[i] = fma(wts[k], r[i], x[i]);
              }
            }
          }
          sum = lanes_sum(sum, red);
        }
        if (on) {
          __global STYPE(A_K)* o = out + o_off + (qh0 + g) * D;
          for (int i = 0; i < DL; ++i)
            if (IN_ROW(lane, i)) STORE(A_K, o, lane * DL + i, sum > 0 ? x[i] / sum : 0.0f);
        }
      }
      if (lid == 0) counters[b] = 0;  // ready for the next launch
    }
  }
}
#undef PF
#undef RA
#undef AHEAD_ROW
#undef LOAD_AHEAD
#undef KP
#undef CR
#undef LANES_RED
#undef NVP
#undef SCAT
#undef SCAT_DUP
#undef PASS_ROW
#undef PASS_ROW_AHEAD
#undef PASS_ROW_LOAD
#undef RE
#undef RL
#undef DV
#undef LS
#undef IN_ROW
#undef lanes_sum
#undef lanes_max
#undef G
#undef NW
#undef DL
#undef PST
#undef TT
#undef KR
#elif GROUPED
// Variant 2 (GPUs, grouped-query attention): work-group (g, s) serves all G = GROUPED query heads
// of kv head g over keys [s * CHUNK, (s + 1) * CHUNK) (all keys unsplit), so each key and value
// row is read once per group instead of once per query head. Per step of WG keys, item j scores
// its key against the G queries; the G online softmaxes reduce side by side; item d then sweeps
// the step's values once, updating the G heads' outputs. Split: partials per query head, and the
// last group of each kv head combines its G heads (counters per kv head).
#define G GROUPED
__kernel void decode_attention_grouped(long hq, long hk, long S, long max_pos, float scale, float eps,
                                       __global const STYPE(A_K)* qkv, long qkv_off,
                                       __global const STYPE(P_K)* pos, long p_off, __global const STYPE(C_K)* cs,
                                       long c_off, __global STYPE(K_K)* cache, long cache_off,
                                       __global const STYPE(W_K)* qn, long qn_off, __global const STYPE(W_K)* kn,
                                       long kn_off, __global STYPE(A_K)* out, long o_off, __global float* part,
                                       __global int* counters) {
  __local float row[D], qs[G * D], kr[D], vr[D], ps[G * WG], red[G * WG];
  NORM_SCRATCH(part_l);
  __local int last_l;
  const int lid = get_local_id(0);
  const long kvh = get_group_id(0), sidx = get_group_id(1), splits = get_num_groups(1);
  const long p = LOADL(P_K, pos, p_off);
  const long L = p < 0 ? 0 : min(p + 1, S);
#if SPLIT
  const long kb = min(sidx * CHUNK, L), ke = min(kb + CHUNK, L);
  const bool empty = kb >= ke && sidx > 0;
#else
  const long kb = 0, ke = L;
  const bool empty = false;
#endif
  float m[G], l[G], acc[G][ACC_N];
  for (int g = 0; g < G; ++g) {
    m[g] = -INFINITY;
    l[g] = 0;
    for (int a = 0; a < ACC_N; ++a) acc[g][a] = 0;
  }
  if (!empty) {
    const bool rotate = p >= 0 && p < max_pos;
    __global const STYPE(C_K)* c = cs + c_off + (rotate ? p : 0) * ROT;
    for (int g = 0; g < G; ++g)
      head_norm_rope(qkv + qkv_off + (kvh * G + g) * D, qn + qn_off, HAS_QN, eps, c, rotate, row, part_l,
                     qs + g * D);
    head_norm_rope(qkv + qkv_off + (hq + kvh) * D, kn + kn_off, HAS_KN, eps, c, rotate, row, part_l, kr);
    __global const STYPE(A_K)* vsrc = qkv + qkv_off + (hq + hk + kvh) * D;
    const bool writer = sidx == 0 && p >= 0 && p < S;
    __global STYPE(K_K)* K = cache + cache_off + kvh * S * D;
    __global STYPE(K_K)* V = cache + cache_off + (hk + kvh) * S * D;
    NEW_KV_ROWS(lid, WG, G);
    barrier(CLK_LOCAL_MEM_FENCE);
    for (long j0 = kb; j0 < ke; j0 += WG) {
      const long j = j0 + lid;
      float s[G];
      for (int g = 0; g < G; ++g) s[g] = j < ke ? 0.0f : -INFINITY;
      if (j < ke) {
        // The new position's key comes from local memory (another group may be writing it).
        if (j == p) {
          for (int d = 0; d < D; ++d)
            for (int g = 0; g < G; ++g) s[g] = fma(qs[g * D + d], kr[d], s[g]);
        } else {
          __global const STYPE(K_K)* k = K + j * D;
#if D % 4 == 0
          for (int d = 0; d < D; d += 4) {
            const float4 kv = LOAD4(K_K, k, d);
            for (int g = 0; g < G; ++g) s[g] += dot(vload4(0, qs + g * D + d), kv);
          }
#else
          for (int d = 0; d < D; ++d) {
            const float kv = LOAD(K_K, k, d);
            for (int g = 0; g < G; ++g) s[g] = fma(qs[g * D + d], kv, s[g]);
          }
#endif
        }
      }
      for (int g = 0; g < G; ++g) red[g * WG + lid] = s[g];
      barrier(CLK_LOCAL_MEM_FENCE);
      for (int w = WG / 2; w > 0; w >>= 1) {
        if (lid < w)
          for (int g = 0; g < G; ++g) red[g * WG + lid] = fmax(red[g * WG + lid], red[g * WG + lid + w]);
        barrier(CLK_LOCAL_MEM_FENCE);
      }
      float mnew[G], alpha[G];
      for (int g = 0; g < G; ++g) mnew[g] = fmax(m[g], red[g * WG]);
      barrier(CLK_LOCAL_MEM_FENCE);
      for (int g = 0; g < G; ++g) {
        const float e = j < ke ? exp(s[g] - mnew[g]) : 0.0f;
        ps[g * WG + lid] = e;
        red[g * WG + lid] = e;
      }
      barrier(CLK_LOCAL_MEM_FENCE);
      for (int w = WG / 2; w > 0; w >>= 1) {
        if (lid < w)
          for (int g = 0; g < G; ++g) red[g * WG + lid] += red[g * WG + lid + w];
        barrier(CLK_LOCAL_MEM_FENCE);
      }
      for (int g = 0; g < G; ++g) {
        alpha[g] = exp(m[g] - mnew[g]);
        l[g] = l[g] * alpha[g] + red[g * WG];
        m[g] = mnew[g];
      }
      const int cnt = (int)min((long)WG, ke - j0);
      for (int a = 0; a < ACC_N; ++a) {
        const int d = lid + a * WG;
        if (d < D) {
          for (int g = 0; g < G; ++g) acc[g][a] *= alpha[g];
          for (int jj = 0; jj < cnt; ++jj) {
            const long jv = j0 + jj;
            const float v = jv == p ? vr[d] : LOAD(K_K, V + jv * D, d);
            for (int g = 0; g < G; ++g) acc[g][a] = fma(ps[g * WG + jj], v, acc[g][a]);
          }
        }
      }
      barrier(CLK_LOCAL_MEM_FENCE);
    }
  }  // !empty
#if SPLIT
  for (int g = 0; g < G; ++g) store_partial(part + ((kvh * G + g) * splits + sidx) * (D + 2), acc[g], m[g], l[g]);
  if (!last_split(counters + kvh, splits, &last_l)) return;
  for (int g = 0; g < G; ++g)
    combine_splits(part + (kvh * G + g) * splits * (D + 2), max((L + CHUNK - 1) / CHUNK, 1L),
                   out + o_off + (kvh * G + g) * D);
  if (lid == 0) counters[kvh] = 0;  // ready for the next launch
#else
  for (int g = 0; g < G; ++g) store_normalized(out + o_off + (kvh * G + g) * D, acc[g], l[g], L);
#endif
}
#undef G
#else
// Split over keys when SPLIT: work-group (h, s) takes keys [s * CHUNK, (s + 1) * CHUNK) of head
// h and writes its unnormalized output, max and sum to `part`; the last of the head's groups to
// finish (an atomic counter, reset by it for the next launch) combines them. The grid covers the
// cache's capacity: groups past the visible length only report empty partials.
__kernel void decode_attention(long hq, long hk, long S, long max_pos, float scale, float eps,
                               __global const STYPE(A_K)* qkv, long qkv_off, __global const STYPE(P_K)* pos,
                               long p_off, __global const STYPE(C_K)* cs, long c_off, __global STYPE(K_K)* cache,
                               long cache_off, __global const STYPE(W_K)* qn, long qn_off,
                               __global const STYPE(W_K)* kn, long kn_off, __global STYPE(A_K)* out, long o_off,
                               __global float* part, __global int* counters) {
  __local float row[D], qs[D], kr[D], vr[D], ps[WG], red[WG];
  NORM_SCRATCH(part_l);
  __local int last_l;
  const int lid = get_local_id(0);
  const long h = get_group_id(0), sidx = get_group_id(1), splits = get_num_groups(1);
  const long group = hq / hk, kvh = h / group;
  const long p = LOADL(P_K, pos, p_off);
  const long L = p < 0 ? 0 : min(p + 1, S);
#if SPLIT
  const long kb = min(sidx * CHUNK, L), ke = min(kb + CHUNK, L);
  // A split past the visible length (most of the grid early in a sequence) only reports empty.
  const bool empty = kb >= ke && sidx > 0;
#else
  const long kb = 0, ke = L;
  const bool empty = false;
#endif
  float m = -INFINITY, l = 0;
  float acc[ACC_N];
  for (int a = 0; a < ACC_N; ++a) acc[a] = 0;
  if (!empty) {
  const bool rotate = p >= 0 && p < max_pos;
  __global const STYPE(C_K)* c = cs + c_off + (rotate ? p : 0) * ROT;
  head_norm_rope(qkv + qkv_off + h * D, qn + qn_off, HAS_QN, eps, c, rotate, row, part_l, qs);
  head_norm_rope(qkv + qkv_off + (hq + kvh) * D, kn + kn_off, HAS_KN, eps, c, rotate, row, part_l, kr);
  __global const STYPE(A_K)* vsrc = qkv + qkv_off + (hq + hk + kvh) * D;
  const bool writer = h % group == 0 && sidx == 0 && p >= 0 && p < S;
  __global STYPE(K_K)* K = cache + cache_off + kvh * S * D;
  __global STYPE(K_K)* V = cache + cache_off + (hk + kvh) * S * D;
  NEW_KV_ROWS(lid, WG, 1);
  barrier(CLK_LOCAL_MEM_FENCE);
  attend_keys(qs, K, V, kb, ke, p, kr, vr, ps, red, &m, &l, acc);
  }  // !empty
  __global STYPE(A_K)* o = out + o_off + h * D;
#if SPLIT
  store_partial(part + (h * splits + sidx) * (D + 2), acc, m, l);
  if (!last_split(counters + h, splits, &last_l)) return;  // the last group combines
  combine_splits(part + h * splits * (D + 2), max((L + CHUNK - 1) / CHUNK, 1L), o);
  if (lid == 0) counters[h] = 0;  // ready for the next launch
#else
  store_normalized(o, acc, l, L);
#endif
}
#endif  // GROUPED
#endif  // ROWS
#endif

// SPDX-License-Identifier: Apache-2.0
// Mask element type and value shared by attention.cl and attention_split.cl (both kernels must
// read masks identically). MASK_KIND: 0 none, 1 additive (storage dtype GT), 2 boolean (uchar,
// nonzero = attend). KEY_MASK: 0 none, 1 a [batch, keys] key mask of type KM_T (uchar for bool,
// int or long; nonzero = attend, as Hugging Face's attention_mask), applied on top of causal
// masking and MASK_KIND. Needs gemm_common.cl (GT, PRISM_LOAD) included first.

#if MASK_KIND == 2
typedef uchar mask_t;
#define MASK_VALUE(p) ((*(p)) ? 0.0f : -INFINITY)
#elif MASK_KIND == 1
typedef GT mask_t;
#define MASK_VALUE(p) PRISM_LOAD(p)
#else
typedef uchar mask_t;
#endif

#if KEY_MASK
typedef KM_T km_t;
#define KEY_OK(j) (Km[(long)(j) * skt] != 0)
#else
typedef uchar km_t;
#define KEY_OK(j) 1
#endif

// Moves the Q, K and V pointers and the masks' (the tiled and tensor-core kernels' shared argument
// names) to batch b, query head h and its kv head hk.
#if MASK_KIND != 0
#define ATTN_SEEK_MASK(b, h) (Mk += m_off + (b) * sm.s0 + (h) * sm.s1)
#else
#define ATTN_SEEK_MASK(b, h) ((void)0)
#endif
#if KEY_MASK
#define ATTN_SEEK_KEY_MASK(b) (Km += km_off + (b) * skb)
#else
#define ATTN_SEEK_KEY_MASK(b) ((void)0)
#endif
#define ATTN_SEEK(b, h, hk)                 \
  do {                                      \
    Q += q_off + (b) * sq.s0 + (h) * sq.s1;  \
    Kp += k_off + (b) * sk.s0 + (hk) * sk.s1; \
    Vp += v_off + (b) * sv.s0 + (hk) * sv.s1; \
    ATTN_SEEK_MASK(b, h);                   \
    ATTN_SEEK_KEY_MASK(b);                  \
  } while (0)

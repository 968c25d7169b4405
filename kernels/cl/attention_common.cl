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

/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * Our shim around rdma-core's mlx5 provider, compiled unchanged beside it (see build.rs): one RC
 * QP and one CQ set up by hand over ordinary memory, as the provider's create paths would leave
 * them, so that its real mlx5_post_send, mlx5_post_recv and mlx5_poll_cq run on a null device —
 * doorbell records, the UAR page (the BlueFlame register at 0x800) and the rings are plain
 * pages, nothing executes. This file is ours; it only includes the provider's headers.
 */
#include <config.h>

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mlx5.h"
#include "wqe.h"

/* What the Rust side asks for (mirrored in src/lib.rs). */
struct theirs_cfg {
	uint32_t qpn;
	uint32_t cqn;
	uint32_t sq_wqebbs;       /* power of two */
	uint32_t sq_max_post;     /* WRs the SQ takes (the provider's sq.max_post) */
	uint32_t rq_wqes;         /* power of two */
	uint32_t rq_wqe_shift;    /* log2 of the RQ stride */
	uint32_t max_send_sge;
	uint32_t max_recv_sge;
	uint32_t max_inline_data;
	uint32_t cq_entries;      /* power of two */
	uint32_t bf_buf_size;     /* one half of the BlueFlame register; 0: none */
	uint32_t need_lock;       /* the provider's locks (its default unless MLX5_SINGLE_THREADED=1) */
};

enum { LISTS = 4, LIST_MAX = 256, INLINE_MAX = 512, PAGE = 4096 };

struct list {
	struct ibv_send_wr wr[LIST_MAX];
	struct ibv_sge sge[LIST_MAX];
	uint8_t data[INLINE_MAX];
};

struct theirs {
	struct theirs_cfg cfg;
	struct mlx5_context *ctx;
	struct mlx5_cq *cq;
	struct mlx5_qp *qp;
	struct mlx5_bf bf;
	void *buf;        /* QP buffer: RQ, then SQ */
	size_t buf_len;
	void *qp_db;      /* 64 bytes: [0] receive, [1] send counter */
	void *cq_db;      /* 64 bytes: [0] consumer index */
	void *cq_ring;
	void *uar;        /* one UAR page */
	struct list *lists;
	struct ibv_recv_wr recv;
	struct ibv_sge recv_sge;
	struct ibv_wc wc[LIST_MAX];
};

/* Called by the provider only on paths a post or poll of these QPs never takes (SRQs, ODP,
 * resizing, the kernel's commands): reaching one is a bug in the bench. */
#define NEVER(name) do { fprintf(stderr, "vs-rdma-core: %s reached\n", name); abort(); } while (0)

int mlx5_freeze_on_error_cqe;
struct ibv_qp_ex *ibv_qp_to_qp_ex(struct ibv_qp *qp) { (void)qp; NEVER("ibv_qp_to_qp_ex"); }
int mlx5_alloc_prefered_buf(struct mlx5_context *mctx, struct mlx5_buf *buf, size_t size,
			    int page_size, enum mlx5_alloc_type alloc_type, const char *component)
{ (void)mctx; (void)buf; (void)size; (void)page_size; (void)alloc_type; (void)component;
  NEVER("mlx5_alloc_prefered_buf"); }
void mlx5_complete_odp_fault(struct mlx5_srq *srq, int ind)
{ (void)srq; (void)ind; NEVER("mlx5_complete_odp_fault"); }
int mlx5_copy_to_recv_srq(struct mlx5_srq *srq, int idx, void *buf, int size)
{ (void)srq; (void)idx; (void)buf; (void)size; NEVER("mlx5_copy_to_recv_srq"); }
struct mlx5_mkey *mlx5_find_mkey(struct mlx5_context *ctx, uint32_t mkeyn)
{ (void)ctx; (void)mkeyn; NEVER("mlx5_find_mkey"); }
struct mlx5_srq *mlx5_find_srq(struct mlx5_context *ctx, uint32_t srqn)
{ (void)ctx; (void)srqn; NEVER("mlx5_find_srq"); }
int mlx5_free_actual_buf(struct mlx5_context *ctx, struct mlx5_buf *buf)
{ (void)ctx; (void)buf; NEVER("mlx5_free_actual_buf"); }
void mlx5_free_srq_wqe(struct mlx5_srq *srq, int ind)
{ (void)srq; (void)ind; NEVER("mlx5_free_srq_wqe"); }
void mlx5_get_alloc_type(struct mlx5_context *context, struct ibv_pd *pd, const char *component,
			 enum mlx5_alloc_type *alloc_type, enum mlx5_alloc_type default_alloc_type)
{ (void)context; (void)pd; (void)component; (void)alloc_type; (void)default_alloc_type;
  NEVER("mlx5_get_alloc_type"); }
int mlx5_get_cmd_status_err(int err, void *out) { (void)err; (void)out; NEVER("mlx5_get_cmd_status_err"); }
int mlx5dv_devx_qp_query(struct ibv_qp *qp, const void *in, size_t inlen, void *out, size_t outlen)
{ (void)qp; (void)in; (void)inlen; (void)out; (void)outlen; NEVER("mlx5dv_devx_qp_query"); }
int mlx5dv_get_clock_info(struct ibv_context *context, struct mlx5dv_clock_info *clock_info)
{ (void)context; (void)clock_info; NEVER("mlx5dv_get_clock_info"); }

static void *page_alloc(size_t len)
{
	void *p = NULL;

	if (posix_memalign(&p, PAGE, (len + PAGE - 1) & ~(size_t)(PAGE - 1)))
		return NULL;
	memset(p, 0, len);
	return p;
}

void theirs_free(struct theirs *t);

static int pow2(uint32_t v) { return v && !(v & (v - 1)); }

struct theirs *theirs_new(const struct theirs_cfg *cfg)
{
	struct theirs *t;
	struct mlx5_qp *qp;
	struct mlx5_cq *cq;
	struct ibv_qp *ibqp;
	size_t rq_bytes;
	uint32_t i;

	if (!pow2(cfg->sq_wqebbs) || !pow2(cfg->rq_wqes) || !pow2(cfg->cq_entries) ||
	    cfg->max_inline_data > INLINE_MAX)
		return NULL;
	t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	t->cfg = *cfg;
	rq_bytes = (size_t)cfg->rq_wqes << cfg->rq_wqe_shift;
	t->buf_len = rq_bytes + ((size_t)cfg->sq_wqebbs << MLX5_SEND_WQE_SHIFT);
	t->ctx = calloc(1, sizeof(*t->ctx));
	t->cq = calloc(1, sizeof(*t->cq));
	t->qp = calloc(1, sizeof(*t->qp));
	t->buf = page_alloc(t->buf_len);
	t->qp_db = page_alloc(64);
	t->cq_db = page_alloc(64);
	t->cq_ring = page_alloc((size_t)cfg->cq_entries * 64);
	t->uar = page_alloc(PAGE);
	t->lists = calloc(LISTS, sizeof(*t->lists));
	qp = t->qp;
	cq = t->cq;
	if (!t->ctx || !cq || !qp || !t->buf || !t->qp_db || !t->cq_db || !t->cq_ring || !t->uar ||
	    !t->lists) {
		theirs_free(t);
		return NULL;
	}

	/* The context: only what post and poll read, and the verbs an application calls through
	 * (ibv_post_send, ibv_post_recv and ibv_poll_cq are inline calls through these). */
	t->ctx->ibv_ctx.context.ops.post_send = mlx5_post_send;
	t->ctx->ibv_ctx.context.ops.post_recv = mlx5_post_recv;
	t->ctx->ibv_ctx.context.ops.poll_cq = mlx5_poll_cq;
	t->ctx->dbg_fp = stderr;
	t->ctx->shut_up_bf = 0;
	t->ctx->prefer_bf = 0;
	t->ctx->bf_reg_size = (int)cfg->bf_buf_size * 2;
	t->ctx->stall_enable = 0;   /* not a Sandy Bridge */
	t->ctx->cqe_version = 0;    /* requester CQEs found by QPN, as ours */

	/* The CQ, as the provider's create_cq leaves it: every CQE invalid, owned by software. */
	cq->verbs_cq.cq.context = &t->ctx->ibv_ctx.context;
	cq->verbs_cq.cq.cqe = (int)cfg->cq_entries - 1;
	cq->buf_a.buf = t->cq_ring;
	cq->buf_a.length = (size_t)cfg->cq_entries * 64;
	cq->active_buf = &cq->buf_a;
	cq->cqe_sz = 64;
	cq->cqn = cfg->cqn;
	cq->dbrec = t->cq_db;
	cq->stall_enable = 0;
	mlx5_spinlock_init(&cq->lock, (int)cfg->need_lock);
	for (i = 0; i < cfg->cq_entries; i++)
		((struct mlx5_cqe64 *)t->cq_ring)[i].op_own = MLX5_CQE_INVALID << 4;

	/* The QP (RC, in RTS): rings in t->buf (RQ first), doorbell record, BlueFlame register. */
	ibqp = &qp->verbs_qp.qp;
	qp->ibv_qp = ibqp;
	qp->rsc.type = MLX5_RSC_TYPE_QP;
	qp->rsc.rsn = cfg->qpn;
	ibqp->context = &t->ctx->ibv_ctx.context;
	ibqp->qp_num = cfg->qpn;
	ibqp->qp_type = IBV_QPT_RC;
	ibqp->state = IBV_QPS_RTS;
	ibqp->send_cq = &cq->verbs_cq.cq;
	ibqp->recv_cq = &cq->verbs_cq.cq;
	qp->buf.buf = t->buf;
	qp->buf.length = t->buf_len;
	qp->buf_size = (int)t->buf_len;
	qp->max_inline_data = (int)cfg->max_inline_data;
	qp->atomics_enabled = 1;
	qp->sq_signal_bits = 0;     /* not sq_sig_all */
	qp->fm_cache = 0;
	qp->wq_sig = 0;

	qp->rq.wqe_cnt = cfg->rq_wqes;
	qp->rq.max_post = cfg->rq_wqes;
	qp->rq.wqe_shift = (int)cfg->rq_wqe_shift;
	qp->rq.max_gs = (int)cfg->max_recv_sge;
	qp->rq.qp_state_max_gs = (int)cfg->max_recv_sge;
	qp->rq.offset = 0;
	qp->rq.wrid = calloc(cfg->rq_wqes, sizeof(uint64_t));
	mlx5_spinlock_init(&qp->rq.lock, (int)cfg->need_lock);

	qp->sq.wqe_cnt = cfg->sq_wqebbs;
	qp->sq.max_post = cfg->sq_max_post;
	qp->sq.wqe_shift = MLX5_SEND_WQE_SHIFT;
	qp->sq.max_gs = (int)cfg->max_send_sge;
	qp->sq.qp_state_max_gs = (int)cfg->max_send_sge;
	qp->sq.offset = (int)rq_bytes;
	qp->sq_start = (uint8_t *)t->buf + rq_bytes;
	qp->sq.qend = (uint8_t *)t->buf + t->buf_len;
	qp->sq.wrid = calloc(cfg->sq_wqebbs, sizeof(uint64_t));
	qp->sq.wqe_head = calloc(cfg->sq_wqebbs, sizeof(unsigned));
	qp->sq.wr_data = calloc(cfg->sq_wqebbs, sizeof(uint32_t));
	mlx5_spinlock_init(&qp->sq.lock, (int)cfg->need_lock);
	qp->db = t->qp_db;

	/* A dedicated low-latency BlueFlame register (uuarn != 0, not shared: no lock). */
	t->bf.reg = (uint8_t *)t->uar + 0x800;
	t->bf.buf_size = cfg->bf_buf_size;
	t->bf.uuarn = 1;
	t->bf.need_lock = 0;
	t->bf.offset = 0;
	mlx5_spinlock_init(&t->bf.lock, 0);
	qp->bf = &t->bf;

	if (!qp->rq.wrid || !qp->sq.wrid || !qp->sq.wqe_head || !qp->sq.wr_data ||
	    mlx5_store_qp(t->ctx, cfg->qpn, qp)) {
		theirs_free(t);
		return NULL;
	}
	return t;
}

void theirs_free(struct theirs *t)
{
	if (!t)
		return;
	if (t->ctx && t->qp && t->ctx->qp_table[t->cfg.qpn >> MLX5_QP_TABLE_SHIFT].refcnt)
		mlx5_clear_qp(t->ctx, t->cfg.qpn);
	if (t->qp) {
		free(t->qp->rq.wrid);
		free(t->qp->sq.wrid);
		free(t->qp->sq.wqe_head);
		free(t->qp->sq.wr_data);
	}
	free(t->lists);
	free(t->uar);
	free(t->cq_ring);
	free(t->cq_db);
	free(t->qp_db);
	free(t->buf);
	free(t->qp);
	free(t->cq);
	free(t->ctx);
	free(t);
}

/* Back to empty rings, as after a modify to RESET and back (the provider's
 * mlx5_init_qp_indices), and the BlueFlame register's first half. */
void theirs_reset(struct theirs *t)
{
	mlx5_init_qp_indices(t->qp);
	t->qp->fm_cache = 0;
	t->bf.offset = 0;
	((uint32_t *)t->qp_db)[MLX5_RCV_DBR] = 0;
	((uint32_t *)t->qp_db)[MLX5_SND_DBR] = 0;
}

/* List `slot`: `n` signaled SENDs with wr_id 0..n of one SGE, or inline (`data` non-NULL) of
 * the SGE's bytes copied from `data`. */
int theirs_set_sends(struct theirs *t, uint32_t slot, uint32_t n, uint64_t addr, uint32_t len,
		     uint32_t lkey, const uint8_t *data)
{
	struct list *l;
	uint32_t i;

	if (slot >= LISTS || n == 0 || n > LIST_MAX || (data && len > INLINE_MAX))
		return EINVAL;
	l = &t->lists[slot];
	if (data)
		memcpy(l->data, data, len);
	for (i = 0; i < n; i++) {
		memset(&l->wr[i], 0, sizeof(l->wr[i]));
		l->sge[i].addr = data ? (uint64_t)(uintptr_t)l->data : addr;
		l->sge[i].length = len;
		l->sge[i].lkey = data ? 0 : lkey;
		l->wr[i].wr_id = i;
		l->wr[i].next = i + 1 < n ? &l->wr[i + 1] : NULL;
		l->wr[i].sg_list = &l->sge[i];
		l->wr[i].num_sge = 1;
		l->wr[i].opcode = IBV_WR_SEND;
		l->wr[i].send_flags = IBV_SEND_SIGNALED | (data ? IBV_SEND_INLINE : 0);
	}
	return 0;
}

/* ibv_post_send (the provider's mlx5_post_send) of list `slot`, `times` times: 0, or the first
 * error. */
int theirs_post_send(struct theirs *t, uint32_t slot, uint64_t times)
{
	struct ibv_send_wr *bad;
	struct ibv_send_wr *wr = t->lists[slot % LISTS].wr;
	uint64_t i;
	int err;

	for (i = 0; i < times; i++) {
		err = ibv_post_send(&t->qp->verbs_qp.qp, wr, &bad);
		if (err)
			return err;
	}
	return 0;
}

/* The receive work request: one SGE. */
void theirs_set_recv(struct theirs *t, uint64_t wr_id, uint64_t addr, uint32_t len, uint32_t lkey)
{
	memset(&t->recv, 0, sizeof(t->recv));
	t->recv_sge.addr = addr;
	t->recv_sge.length = len;
	t->recv_sge.lkey = lkey;
	t->recv.wr_id = wr_id;
	t->recv.sg_list = &t->recv_sge;
	t->recv.num_sge = 1;
}

/* ibv_post_recv (mlx5_post_recv) of the receive work request, `times` times: 0, or the first
 * error. */
int theirs_post_recv(struct theirs *t, uint64_t times)
{
	struct ibv_recv_wr *bad;
	uint64_t i;
	int err;

	for (i = 0; i < times; i++) {
		err = ibv_post_recv(&t->qp->verbs_qp.qp, &t->recv, &bad);
		if (err)
			return err;
	}
	return 0;
}

/* The device's write of a CQE into slot `slot`: seven words, then the one holding op_own with
 * release (the owner byte visible last). */
void theirs_write_cqe(struct theirs *t, uint32_t slot, const uint8_t img[64])
{
	uint64_t *dst = (uint64_t *)((uint8_t *)t->cq_ring + (size_t)(slot & (t->cfg.cq_entries - 1)) * 64);
	uint64_t w;
	int i;

	for (i = 0; i < 7; i++) {
		memcpy(&w, img + 8 * i, 8);
		__atomic_store_n(&dst[i], w, __ATOMIC_RELAXED);
	}
	memcpy(&w, img + 56, 8);
	__atomic_store_n(&dst[7], w, __ATOMIC_RELEASE);
}

/* ibv_poll_cq (mlx5_poll_cq) until `total` completions, `per_call` at a time: the number
 * polled, or -1 on an error (CQ_POLL_ERR) or an empty CQ before `total`. */
int theirs_poll(struct theirs *t, uint32_t total, uint32_t per_call)
{
	uint32_t got = 0;
	int n;

	if (total > LIST_MAX)
		return -1;
	while (got < total) {
		uint32_t want = total - got < per_call ? total - got : per_call;

		n = ibv_poll_cq(&t->cq->verbs_cq.cq, (int)want, t->wc + got);
		if (n <= 0)
			return -1;
		got += (uint32_t)n;
	}
	return (int)got;
}

/* Completion `i` of the last poll: wr_id, status, opcode, byte_len, qp_num. */
void theirs_wc(const struct theirs *t, uint32_t i, uint64_t *wr_id, uint32_t *status,
	       uint32_t *opcode, uint32_t *qp_num)
{
	const struct ibv_wc *wc = &t->wc[i % LIST_MAX];

	*wr_id = wc->wr_id;
	*status = wc->status;
	*opcode = wc->opcode;
	*qp_num = wc->qp_num;
}

/* Copies `len` bytes at `off` of one of the memories the provider wrote: 0 the QP buffer, 1 the
 * QP doorbell record, 2 the UAR page, 3 the CQ doorbell record, 4 the CQ ring. 0, or EINVAL out
 * of bounds. */
int theirs_read(const struct theirs *t, uint32_t what, uint64_t off, uint8_t *out, uint64_t len)
{
	const uint8_t *base;
	uint64_t size;

	switch (what) {
	case 0: base = t->buf; size = t->buf_len; break;
	case 1: base = t->qp_db; size = 64; break;
	case 2: base = t->uar; size = PAGE; break;
	case 3: base = t->cq_db; size = 64; break;
	case 4: base = t->cq_ring; size = (uint64_t)t->cfg.cq_entries * 64; break;
	default: return EINVAL;
	}
	if (off > size || len > size - off)
		return EINVAL;
	memcpy(out, base + off, len);
	return 0;
}

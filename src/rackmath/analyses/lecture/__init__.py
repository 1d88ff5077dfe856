"""The lecture's chapters: batching, racks, pipelining, pricing, context, memory tiers, scaling laws, the lifetime
compute split, energy and RevNet."""

/* Pod CIDR ownership (local-net-cidr.c): overlap of any two prefixes, the pick of a free /24. */
#include <errno.h>

#include "local/net/local-net-cidr.h"
#include "unit.h"

#define IP(a, b, c, d) ((uint32_t)(a) << 24 | (uint32_t)(b) << 16 | (uint32_t)(c) << 8 | (d))

TEST(overlap_either_way)
{
    local_net_cidr_uses u = {0};
    CHECK_INT_EQ(local_net_cidr_uses_add(&u, IP(10, 244, 0, 1), 24, "address of asbX"), 0);
    CHECK_INT_EQ(local_net_cidr_uses_add(&u, IP(192, 168, 0, 0), 16, "route 192.168/16"), 0);
    CHECK_STR_EQ(local_net_cidr_conflict(&u, IP(10, 244, 0, 0), 24), "address of asbX");
    CHECK_STR_EQ(local_net_cidr_conflict(&u, IP(10, 0, 0, 0), 8), "address of asbX"); /* wider */
    CHECK_STR_EQ(local_net_cidr_conflict(&u, IP(10, 244, 0, 128), 25), "address of asbX");
    CHECK(local_net_cidr_conflict(&u, IP(10, 244, 1, 0), 24) == NULL);
    CHECK_STR_EQ(local_net_cidr_conflict(&u, IP(192, 168, 77, 0), 24), "route 192.168/16");
    CHECK(local_net_cidr_conflict(&u, IP(192, 169, 0, 0), 24) == NULL);
    local_net_cidr_uses_clear(&u);
    CHECK(u.n == 0 && u.v == NULL);
}

TEST(pick_first_free_24)
{
    local_net_cidr_uses u = {0};
    uint32_t net = 0;
    CHECK_INT_EQ(local_net_cidr_pick(&u, &net), 0);
    CHECK_INT_EQ(net, IP(10, 244, 0, 0));
    local_net_cidr_uses_add(&u, IP(10, 244, 0, 0), 24, "a");
    local_net_cidr_uses_add(&u, IP(10, 244, 1, 7), 32, "b");
    local_net_cidr_uses_add(&u, IP(10, 244, 2, 0), 23, "c"); /* 2 and 3 */
    CHECK_INT_EQ(local_net_cidr_pick(&u, &net), 0);
    CHECK_INT_EQ(net, IP(10, 244, 4, 0));
    local_net_cidr_uses_add(&u, IP(10, 0, 0, 0), 8, "everything");
    CHECK_INT_EQ(local_net_cidr_pick(&u, &net), -EADDRNOTAVAIL);
    local_net_cidr_uses_clear(&u);
}

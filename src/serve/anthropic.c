#include "serve/server.h"
void anthropic_messages(server *S, const char *body, size_t len, http_reply *r)
{
    (void)S; (void)body; (void)len;
    http_reply_error(r, 404, NULL, "todo");
}

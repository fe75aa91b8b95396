// SPDX-License-Identifier: Apache-2.0
// Must not compile: a store statement that names a column no table of the
// schema has (ctest checked_sql_refuses_an_unknown_column expects the
// compiler's message to name it).
#include "causeway/store/checked_sql.h"

std::string renamed() { return causeway::store::sql<"SELECT dur_nss FROM cuda_call_events WHERE {}">("1"); }

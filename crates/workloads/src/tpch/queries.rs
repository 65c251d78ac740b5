//! The 22 queries (clause 2.4), written once in a portable form and
//! rendered per engine family.
//!
//! `{N}` is the N-th substitution value of [`super::params`]; `{year:COL}`
//! is `extract(year from COL)` (SQLite: `strftime`); `{text:COL}` casts a
//! date to text in the select list (the connection API returns numbers and
//! text, and ISO text sorts as dates do); `{view}` is Q15's per-stream view.
//! Date arithmetic is done when the parameters are drawn, so no engine needs
//! interval syntax. Clause 2.1.2 allows these as minor query modifications:
//! the derived-column list of Q13 is written as column aliases (MariaDB has
//! no derived-column lists) and `substring(x from 1 for 2)` as
//! `substr(x, 1, 2)` (the one spelling all three engines accept).

use storbench_db::Dialect;

use super::params::Params;

const Q1: &str = "select l_returnflag, l_linestatus, sum(l_quantity) as sum_qty, sum(l_extendedprice) as sum_base_price, \
sum(l_extendedprice * (1 - l_discount)) as sum_disc_price, sum(l_extendedprice * (1 - l_discount) * (1 + l_tax)) as sum_charge, \
avg(l_quantity) as avg_qty, avg(l_extendedprice) as avg_price, avg(l_discount) as avg_disc, count(*) as count_order \
from lineitem where l_shipdate <= {2} group by l_returnflag, l_linestatus order by l_returnflag, l_linestatus";

const Q2: &str = "select s_acctbal, s_name, n_name, p_partkey, p_mfgr, s_address, s_phone, s_comment \
from part, supplier, partsupp, nation, region \
where p_partkey = ps_partkey and s_suppkey = ps_suppkey and p_size = {1} and p_type like {2} \
and s_nationkey = n_nationkey and n_regionkey = r_regionkey and r_name = {3} \
and ps_supplycost = (select min(ps_supplycost) from partsupp, supplier, nation, region \
where p_partkey = ps_partkey and s_suppkey = ps_suppkey and s_nationkey = n_nationkey \
and n_regionkey = r_regionkey and r_name = {3}) \
order by s_acctbal desc, n_name, s_name, p_partkey limit 100";

const Q3: &str = "select l_orderkey, sum(l_extendedprice * (1 - l_discount)) as revenue, {text:o_orderdate} as o_orderdate, o_shippriority \
from customer, orders, lineitem \
where c_mktsegment = {1} and c_custkey = o_custkey and l_orderkey = o_orderkey and o_orderdate < {2} and l_shipdate > {2} \
group by l_orderkey, o_orderdate, o_shippriority order by revenue desc, o_orderdate limit 10";

const Q4: &str = "select o_orderpriority, count(*) as order_count from orders \
where o_orderdate >= {1} and o_orderdate < {2} \
and exists (select * from lineitem where l_orderkey = o_orderkey and l_commitdate < l_receiptdate) \
group by o_orderpriority order by o_orderpriority";

const Q5: &str = "select n_name, sum(l_extendedprice * (1 - l_discount)) as revenue \
from customer, orders, lineitem, supplier, nation, region \
where c_custkey = o_custkey and l_orderkey = o_orderkey and l_suppkey = s_suppkey and c_nationkey = s_nationkey \
and s_nationkey = n_nationkey and n_regionkey = r_regionkey and r_name = {1} \
and o_orderdate >= {2} and o_orderdate < {3} group by n_name order by revenue desc";

const Q6: &str = "select sum(l_extendedprice * l_discount) as revenue from lineitem \
where l_shipdate >= {1} and l_shipdate < {2} and l_discount between {3} and {4} and l_quantity < {5}";

const Q7: &str = "select supp_nation, cust_nation, l_year, sum(volume) as revenue from (\
select n1.n_name as supp_nation, n2.n_name as cust_nation, {year:l_shipdate} as l_year, \
l_extendedprice * (1 - l_discount) as volume \
from supplier, lineitem, orders, customer, nation n1, nation n2 \
where s_suppkey = l_suppkey and o_orderkey = l_orderkey and c_custkey = o_custkey \
and s_nationkey = n1.n_nationkey and c_nationkey = n2.n_nationkey \
and ((n1.n_name = {1} and n2.n_name = {2}) or (n1.n_name = {2} and n2.n_name = {1})) \
and l_shipdate between {date1995} and {date1996}) as shipping \
group by supp_nation, cust_nation, l_year order by supp_nation, cust_nation, l_year";

const Q8: &str = "select o_year, sum(case when nation = {1} then volume else 0 end) / sum(volume) as mkt_share from (\
select {year:o_orderdate} as o_year, l_extendedprice * (1 - l_discount) as volume, n2.n_name as nation \
from part, supplier, lineitem, orders, customer, nation n1, nation n2, region \
where p_partkey = l_partkey and s_suppkey = l_suppkey and l_orderkey = o_orderkey and o_custkey = c_custkey \
and c_nationkey = n1.n_nationkey and n1.n_regionkey = r_regionkey and r_name = {2} \
and s_nationkey = n2.n_nationkey and o_orderdate between {date1995} and {date1996} and p_type = {3}) as all_nations \
group by o_year order by o_year";

const Q9: &str = "select nation, o_year, sum(amount) as sum_profit from (\
select n_name as nation, {year:o_orderdate} as o_year, \
l_extendedprice * (1 - l_discount) - ps_supplycost * l_quantity as amount \
from part, supplier, lineitem, partsupp, orders, nation \
where s_suppkey = l_suppkey and ps_suppkey = l_suppkey and ps_partkey = l_partkey and p_partkey = l_partkey \
and o_orderkey = l_orderkey and s_nationkey = n_nationkey and p_name like {1}) as profit \
group by nation, o_year order by nation, o_year desc";

const Q10: &str =
    "select c_custkey, c_name, sum(l_extendedprice * (1 - l_discount)) as revenue, c_acctbal, n_name, \
c_address, c_phone, c_comment from customer, orders, lineitem, nation \
where c_custkey = o_custkey and l_orderkey = o_orderkey and o_orderdate >= {1} and o_orderdate < {2} \
and l_returnflag = 'R' and c_nationkey = n_nationkey \
group by c_custkey, c_name, c_acctbal, c_phone, n_name, c_address, c_comment order by revenue desc limit 20";

const Q11: &str =
    "select ps_partkey, sum(ps_supplycost * ps_availqty) as value from partsupp, supplier, nation \
where ps_suppkey = s_suppkey and s_nationkey = n_nationkey and n_name = {1} group by ps_partkey \
having sum(ps_supplycost * ps_availqty) > (select sum(ps_supplycost * ps_availqty) * {2} \
from partsupp, supplier, nation where ps_suppkey = s_suppkey and s_nationkey = n_nationkey and n_name = {1}) \
order by value desc";

const Q12: &str = "select l_shipmode, \
sum(case when o_orderpriority = '1-URGENT' or o_orderpriority = '2-HIGH' then 1 else 0 end) as high_line_count, \
sum(case when o_orderpriority <> '1-URGENT' and o_orderpriority <> '2-HIGH' then 1 else 0 end) as low_line_count \
from orders, lineitem where o_orderkey = l_orderkey and l_shipmode in ({1}, {2}) \
and l_commitdate < l_receiptdate and l_shipdate < l_commitdate and l_receiptdate >= {3} and l_receiptdate < {4} \
group by l_shipmode order by l_shipmode";

const Q13: &str = "select c_count, count(*) as custdist from (\
select c_custkey, count(o_orderkey) as c_count from customer left outer join orders \
on c_custkey = o_custkey and o_comment not like {1} group by c_custkey) as c_orders \
group by c_count order by custdist desc, c_count desc";

const Q14: &str =
    "select 100.00 * sum(case when p_type like 'PROMO%' then l_extendedprice * (1 - l_discount) else 0 end) \
/ sum(l_extendedprice * (1 - l_discount)) as promo_revenue from lineitem, part \
where l_partkey = p_partkey and l_shipdate >= {1} and l_shipdate < {2}";

const Q15_VIEW: &str = "create view {view} (supplier_no, total_revenue) as \
select l_suppkey, sum(l_extendedprice * (1 - l_discount)) from lineitem \
where l_shipdate >= {1} and l_shipdate < {2} group by l_suppkey";

const Q15: &str = "select s_suppkey, s_name, s_address, s_phone, total_revenue from supplier, {view} \
where s_suppkey = supplier_no and total_revenue = (select max(total_revenue) from {view}) order by s_suppkey";

const Q16: &str =
    "select p_brand, p_type, p_size, count(distinct ps_suppkey) as supplier_cnt from partsupp, part \
where p_partkey = ps_partkey and p_brand <> {1} and p_type not like {2} \
and p_size in ({3}, {4}, {5}, {6}, {7}, {8}, {9}, {10}) \
and ps_suppkey not in (select s_suppkey from supplier where s_comment like '%Customer%Complaints%') \
group by p_brand, p_type, p_size order by supplier_cnt desc, p_brand, p_type, p_size";

const Q17: &str = "select sum(l_extendedprice) / 7.0 as avg_yearly from lineitem, part \
where p_partkey = l_partkey and p_brand = {1} and p_container = {2} \
and l_quantity < (select 0.2 * avg(l_quantity) from lineitem where l_partkey = p_partkey)";

const Q18: &str = "select c_name, c_custkey, o_orderkey, {text:o_orderdate} as o_orderdate, o_totalprice, sum(l_quantity) \
from customer, orders, lineitem \
where o_orderkey in (select l_orderkey from lineitem group by l_orderkey having sum(l_quantity) > {1}) \
and c_custkey = o_custkey and o_orderkey = l_orderkey \
group by c_name, c_custkey, o_orderkey, o_orderdate, o_totalprice order by o_totalprice desc, o_orderdate limit 100";

const Q19: &str = "select sum(l_extendedprice * (1 - l_discount)) as revenue from lineitem, part where \
(p_partkey = l_partkey and p_brand = {4} and p_container in ('SM CASE', 'SM BOX', 'SM PACK', 'SM PKG') \
and l_quantity >= {1} and l_quantity <= {1} + 10 and p_size between 1 and 5 \
and l_shipmode in ('AIR', 'AIR REG') and l_shipinstruct = 'DELIVER IN PERSON') or \
(p_partkey = l_partkey and p_brand = {5} and p_container in ('MED BAG', 'MED BOX', 'MED PKG', 'MED PACK') \
and l_quantity >= {2} and l_quantity <= {2} + 10 and p_size between 1 and 10 \
and l_shipmode in ('AIR', 'AIR REG') and l_shipinstruct = 'DELIVER IN PERSON') or \
(p_partkey = l_partkey and p_brand = {6} and p_container in ('LG CASE', 'LG BOX', 'LG PACK', 'LG PKG') \
and l_quantity >= {3} and l_quantity <= {3} + 10 and p_size between 1 and 15 \
and l_shipmode in ('AIR', 'AIR REG') and l_shipinstruct = 'DELIVER IN PERSON')";

const Q20: &str = "select s_name, s_address from supplier, nation where s_suppkey in (\
select ps_suppkey from partsupp where ps_partkey in (select p_partkey from part where p_name like {1}) \
and ps_availqty > (select 0.5 * sum(l_quantity) from lineitem where l_partkey = ps_partkey \
and l_suppkey = ps_suppkey and l_shipdate >= {2} and l_shipdate < {3})) \
and s_nationkey = n_nationkey and n_name = {4} order by s_name";

const Q21: &str = "select s_name, count(*) as numwait from supplier, lineitem l1, orders, nation \
where s_suppkey = l1.l_suppkey and o_orderkey = l1.l_orderkey and o_orderstatus = 'F' \
and l1.l_receiptdate > l1.l_commitdate \
and exists (select * from lineitem l2 where l2.l_orderkey = l1.l_orderkey and l2.l_suppkey <> l1.l_suppkey) \
and not exists (select * from lineitem l3 where l3.l_orderkey = l1.l_orderkey and l3.l_suppkey <> l1.l_suppkey \
and l3.l_receiptdate > l3.l_commitdate) \
and s_nationkey = n_nationkey and n_name = {1} group by s_name order by numwait desc, s_name limit 100";

const Q22: &str = "select cntrycode, count(*) as numcust, sum(c_acctbal) as totacctbal from (\
select substr(c_phone, 1, 2) as cntrycode, c_acctbal from customer \
where substr(c_phone, 1, 2) in ({1}, {2}, {3}, {4}, {5}, {6}, {7}) \
and c_acctbal > (select avg(c_acctbal) from customer where c_acctbal > 0.00 \
and substr(c_phone, 1, 2) in ({1}, {2}, {3}, {4}, {5}, {6}, {7})) \
and not exists (select * from orders where o_custkey = c_custkey)) as custsale \
group by cntrycode order by cntrycode";

const TEXTS: [&str; 22] =
    [Q1, Q2, Q3, Q4, Q5, Q6, Q7, Q8, Q9, Q10, Q11, Q12, Q13, Q14, Q15, Q16, Q17, Q18, Q19, Q20, Q21, Q22];

/// A query ready to run: statements before the measured one (Q15's view),
/// the one whose rows are the answer, and statements after. All of them are
/// timed, as clause 5.3.7 times a query from its first to its last statement.
#[derive(Clone, Debug, PartialEq)]
pub struct QueryText {
    /// Query number, 1–22.
    pub number: u8,
    /// Run first (CREATE VIEW).
    pub before: Vec<String>,
    /// The query whose rows are the answer.
    pub main: String,
    /// Run last, also after a failure (DROP VIEW).
    pub after: Vec<String>,
}

/// The name of stream `stream`'s Q15 view.
pub fn view_name(stream: usize) -> String {
    format!("revenue{stream}")
}

fn render(t: &str, p: &Params, d: Dialect, stream: usize) -> String {
    let mut out = String::with_capacity(t.len() + 64);
    let mut rest = t;
    while let Some(i) = rest.find('{') {
        out.push_str(&rest[..i]);
        let Some(j) = rest[i..].find('}') else {
            out.push_str(&rest[i..]);
            rest = "";
            break;
        };
        let tok = &rest[i + 1..i + j];
        rest = &rest[i + j + 1..];
        if let Ok(n) = tok.parse::<usize>() {
            out.push_str(&p.get(n - 1).map(|(_, v)| v.sql(d)).unwrap_or_default());
        } else if let Some(col) = tok.strip_prefix("year:") {
            out.push_str(&match d {
                Dialect::Sqlite => format!("cast(strftime('%Y', {col}) as integer)"),
                _ => format!("extract(year from {col})"),
            });
        } else if let Some(col) = tok.strip_prefix("text:") {
            out.push_str(&match d {
                Dialect::Sqlite => col.to_string(),
                Dialect::Postgres => format!("cast({col} as text)"),
                Dialect::Mysql => format!("cast({col} as char)"),
            });
        } else if tok == "view" {
            out.push_str(&view_name(stream));
        } else if let Some(year) = tok.strip_prefix("date") {
            // Q7 and Q8's fixed two-year window (1995-01-01 .. 1996-12-31).
            let (y, end) = (year.parse::<i32>().unwrap_or(1995), year == "1996");
            let lit = if end { format!("{y}-12-31") } else { format!("{y}-01-01") };
            out.push_str(&match d {
                Dialect::Sqlite => format!("'{lit}'"),
                _ => format!("date '{lit}'"),
            });
        }
    }
    out.push_str(rest);
    out
}

/// Query `q` with parameters `p`, for dialect `d`, as stream `stream` runs it.
pub fn text(q: u8, p: &Params, d: Dialect, stream: usize) -> QueryText {
    let main = render(TEXTS[(q - 1) as usize], p, d, stream);
    if q == 15 {
        QueryText {
            number: q,
            before: vec![render(Q15_VIEW, p, d, stream)],
            main,
            after: vec![format!("drop view {}", view_name(stream))],
        }
    } else {
        QueryText { number: q, before: Vec::new(), main, after: Vec::new() }
    }
}

#[cfg(test)]
mod tests {
    use super::super::params::validation;
    use super::*;

    #[test]
    fn every_placeholder_is_substituted_in_every_dialect() {
        for d in [Dialect::Sqlite, Dialect::Postgres, Dialect::Mysql] {
            for q in 1..=22 {
                let t = text(q, &validation(q, 1.0), d, 3);
                for s in t.before.iter().chain([&t.main]) {
                    assert!(!s.contains('{') && !s.contains('}'), "Q{q} {d:?}: {s}");
                    assert!(!s.contains("interval"), "Q{q}: no interval arithmetic");
                }
            }
        }
        let q1 = text(1, &validation(1, 1.0), Dialect::Postgres, 0);
        assert!(q1.main.contains("l_shipdate <= date '1998-09-02'"));
        let q15 = text(15, &validation(15, 1.0), Dialect::Sqlite, 2);
        assert!(q15.before[0].starts_with("create view revenue2"));
        assert!(q15.before[0].contains(">= '1996-01-01' and l_shipdate < '1996-04-01'"));
        assert_eq!(q15.after, vec!["drop view revenue2".to_string()]);
        let q7 = text(7, &validation(7, 1.0), Dialect::Mysql, 0);
        assert!(q7.main.contains("between date '1995-01-01' and date '1996-12-31'"));
        assert!(q7.main.contains("extract(year from l_shipdate)"));
    }
}

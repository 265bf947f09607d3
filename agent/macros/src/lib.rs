//! `#[frame]`: makes an `async fn` appear as a frame in asyncdump chains. `#[test]`: a
//! `#[tokio::test]` that, when it runs past its timeout, prints every task's chain and fails.
//!
//! The macro turns `async fn f(args) -> T { body }` into
//! `fn f(args) -> impl Future<Output = T> { static META = ("module::f", here); framed_fn(&META, async move {
//! let r: T = body; r }) }`: one future per call, the body's own, wrapped once, its name and location in a
//! `static` so that the frame carries one pointer to them. (Keeping `async fn` and awaiting the wrapper inside it,
//! as tracing's `#[instrument]` does, adds a second state machine per level and copies each level's
//! future one more time: in the benchmarks that cost twice the time per frame.) The `static` is spanned at
//! the function's name, so the recorded location is the function's own line. The type ascription keeps `?` and
//! `return` inference identical to the original body (skipped when the return type is `impl Trait`, which
//! cannot be named there). The `impl Future` is spanned so that the 2024 capture rules apply in every
//! edition: like an `async fn`, the future captures every argument lifetime.

// Functions fit on a screen: clippy.toml sets the limit (80 lines), CI denies what goes over it.
#![warn(clippy::too_many_lines)]

use proc_macro::TokenStream;
use proc_macro2::Span;
use quote::{quote, quote_spanned};
use syn::punctuated::Punctuated;
use syn::{
    Expr, ItemFn, Lit, LitStr, Meta, ReturnType, Token, Type, parse_macro_input, spanned::Spanned,
};

/// Records this `async fn` as a frame. `#[frame]` names it `module::fn`; `#[frame("label")]` uses the label.
#[proc_macro_attribute]
pub fn frame(attr: TokenStream, item: TokenStream) -> TokenStream {
    let label = if attr.is_empty() {
        None
    } else {
        Some(parse_macro_input!(attr as LitStr))
    };
    let mut func = parse_macro_input!(item as ItemFn);
    if func.sig.asyncness.is_none() {
        return syn::Error::new(
            func.sig.fn_token.span(),
            "#[frame] applies to `async fn`; for other futures use `.frame(\"label\")` from asyncdump_agent::FrameExt",
        )
        .to_compile_error()
        .into();
    }
    let ident = func.sig.ident.clone();
    let name = match label {
        Some(label) => quote!(#label),
        None => {
            let ident = ident.to_string();
            quote!(::core::concat!(::core::module_path!(), "::", #ident))
        }
    };
    let body = &func.block;
    let (output, ascribed) = match &func.sig.output {
        ReturnType::Default => (
            quote!(()),
            quote!(let __asyncdump_ret: () = #body; __asyncdump_ret),
        ),
        ReturnType::Type(_, ty) if !matches!(**ty, Type::ImplTrait(_)) => (
            quote!(#ty),
            quote!(let __asyncdump_ret: #ty = #body; __asyncdump_ret),
        ),
        ReturnType::Type(_, ty) => (quote!(#ty), quote!(#body)),
    };
    // Spanned at the function's name: in a constant, `Location::caller()` is where it is written.
    let meta = quote_spanned! {ident.span()=>
        static __ASYNCDUMP_META: ::asyncdump_agent::__private::Meta =
            ::asyncdump_agent::__private::Meta::annotated_fn(#name, ::core::panic::Location::caller());
    };
    let future = quote_spanned!(Span::mixed_site()=> impl ::core::future::Future<Output = #output>);
    func.sig.asyncness = None;
    func.sig.output = syn::parse_quote!(-> #future);
    *func.block = syn::parse_quote!({
        // The ascription's trailing read is unreachable for bodies that never return (`loop {}`), and a
        // unit-typed `let` for `()` functions: both are artefacts of the expansion, not of the user's code.
        #[allow(unreachable_code, clippy::let_unit_value)]
        let __asyncdump_body = async move { #ascribed };
        #meta
        ::asyncdump_agent::__private::framed_fn(&__ASYNCDUMP_META, __asyncdump_body)
    });
    quote!(#func).into()
}

/// A `#[tokio::test]` with a timeout (`timeout = "30s"`; `500ms`, `2m`, `1h`; 60 s when not given):
/// past it, every task's chain is printed (by the installed `asyncdump` inspector) and the test
/// fails, naming itself. Every other argument goes to `#[tokio::test]` as it is (`flavor =
/// "multi_thread"`, `worker_threads = 2`). See `asyncdump_agent::testing`.
#[proc_macro_attribute]
pub fn test(attr: TokenStream, item: TokenStream) -> TokenStream {
    let args = parse_macro_input!(attr with Punctuated::<Meta, Token![,]>::parse_terminated);
    let func = parse_macro_input!(item as ItemFn);
    if func.sig.asyncness.is_none() {
        return syn::Error::new(
            func.sig.fn_token.span(),
            "#[asyncdump_agent::test] applies to `async fn`",
        )
        .to_compile_error()
        .into();
    }
    let mut timeout_ns: u64 = 60_000_000_000;
    let mut rest = Vec::new();
    for arg in args {
        match &arg {
            Meta::NameValue(nv) if nv.path.is_ident("timeout") => match duration_ns(&nv.value) {
                Ok(ns) => timeout_ns = ns,
                Err(e) => return e.to_compile_error().into(),
            },
            _ => rest.push(arg),
        }
    }
    let ItemFn {
        attrs,
        vis,
        mut sig,
        block,
    } = func;
    let name = sig.ident.to_string();
    sig.asyncness = Some(Default::default());
    quote!(
        #(#attrs)*
        #[::tokio::test(#(#rest),*)]
        #vis #sig {
            ::asyncdump_agent::testing::timeout(
                ::core::time::Duration::from_nanos(#timeout_ns),
                ::core::concat!(::core::module_path!(), "::", #name),
                async move #block,
            )
            .await
        }
    )
    .into()
}

/// `"30s"`, `"500ms"`, `"2m"`, `"1h"` in nanoseconds; anything else is a compile error at it.
fn duration_ns(value: &Expr) -> syn::Result<u64> {
    let bad = || {
        syn::Error::new(
            value.span(),
            "timeout takes a string: \"500ms\", \"30s\", \"2m\" or \"1h\"",
        )
    };
    let Expr::Lit(lit) = value else {
        return Err(bad());
    };
    let Lit::Str(text) = &lit.lit else {
        return Err(bad());
    };
    let text = text.value();
    let split = text.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?;
    let (n, unit) = text.split_at(split);
    let n: u64 = n.parse().map_err(|_| bad())?;
    let scale: u64 = match unit {
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        "m" => 60_000_000_000,
        "h" => 3_600_000_000_000,
        _ => return Err(bad()),
    };
    n.checked_mul(scale).filter(|&ns| ns > 0).ok_or_else(bad)
}

#[cfg(test)]
mod tests {
    use super::duration_ns;

    #[test]
    fn a_timeout_reads_with_its_unit_and_is_refused_without_one() {
        let ns = |text: &str| duration_ns(&syn::parse_str(text).unwrap()).ok();
        assert_eq!(ns(r#""500ms""#), Some(500_000_000));
        assert_eq!(ns(r#""30s""#), Some(30_000_000_000));
        assert_eq!(ns(r#""2m""#), Some(120_000_000_000));
        assert_eq!(ns(r#""1h""#), Some(3_600_000_000_000));
        for bad in [
            r#""30""#,
            r#""0s""#,
            r#""1.5s""#,
            r#""s""#,
            "30",
            r#""99999999999h""#,
        ] {
            assert_eq!(ns(bad), None, "{bad}");
        }
    }
}

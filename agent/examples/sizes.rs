use asyncdump_agent::frame;
async fn p1(x: u32) -> u32 {
    std::future::ready(x).await
}
async fn p2(x: u32) -> u32 {
    p1(x).await
}
async fn p3(x: u32) -> u32 {
    p2(x).await
}
#[frame]
async fn f1(x: u32) -> u32 {
    std::future::ready(x).await
}
#[frame]
async fn f2(x: u32) -> u32 {
    f1(x).await
}
#[frame]
async fn f3(x: u32) -> u32 {
    f2(x).await
}
fn main() {
    println!(
        "plain: {} {} {}",
        std::mem::size_of_val(&p1(1)),
        std::mem::size_of_val(&p2(1)),
        std::mem::size_of_val(&p3(1))
    );
    println!(
        "frame: {} {} {}",
        std::mem::size_of_val(&f1(1)),
        std::mem::size_of_val(&f2(1)),
        std::mem::size_of_val(&f3(1))
    );
}
